package toolbash

import (
	"fmt"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/roles"
	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/shell"
)

// A session's role may set a ceiling on the sandbox mode its commands run in (the roles
// plugin's maxMode). Under it, the session's schema offers only the escalations within it,
// a call runs in at most that mode whatever the executor's default or the session's
// override, and a wider escalation is refused before anyone is asked.

// ceiling is the sandbox ceiling of one session: the widest mode its commands may run
// in, and the role that sets it. The zero value is none.
type ceiling struct {
	max  string
	role string
}

// ceiling returns the ceiling of session's role, looked up at call time.
func (t *bashTool) ceiling(session *container.Session) ceiling {
	rs, ok := container.Lookup(t.services, roles.Service)
	if !ok {
		return ceiling{}
	}
	m, role := rs.Ceiling(session)
	return ceiling{max: m, role: role}
}

// binds reports whether c is below danger-full-access: whether it narrows anything.
func (c ceiling) binds() bool {
	return c.max != "" && shell.ModeRank(c.max) < shell.ModeRank(shell.ModeDangerFullAccess)
}

// allows reports whether mode is within c.
func (c ceiling) allows(mode string) bool {
	return !c.binds() || shell.ModeRank(mode) <= shell.ModeRank(c.max)
}

// clamp is mode, or the ceiling when mode is wider.
func (c ceiling) clamp(mode string) string {
	if c.allows(mode) {
		return mode
	}
	return c.max
}

// escalations are the modes sandbox_permissions offers under c.
func (c ceiling) escalations() []string {
	var out []string
	for _, m := range []string{shell.ModeWorkspaceWrite, shell.ModeDangerFullAccess} {
		if c.allows(m) {
			out = append(out, m)
		}
	}
	return out
}

// exceeded is the refusal of an escalation to m past c.
func (c ceiling) exceeded(m string) failure {
	return failure(fmt.Sprintf("sandbox escalation to %q exceeds the %q role's ceiling %q", m, c.role, c.max))
}

// unkept is the refusal of every call of a role with a ceiling on an executor that does not
// confine (one swapped in after the roles row checked it).
func (c ceiling) unkept() failure {
	return failure(fmt.Sprintf("the %q role's sandbox ceiling %q cannot be kept: this composition's executor does not confine commands", c.role, c.max))
}

// shaped is the bash tool as a session under a ceiling sees it.
type shaped struct {
	description string
	schema      *tools.Schema
}

// shapes builds the tool for each ceiling that narrows it (read-only, workspace-write),
// once per registration, so that Shape returns the same values every time.
func (t *bashTool) shapes() map[string]shaped {
	out := map[string]shaped{}
	for _, m := range []string{shell.ModeReadOnly, shell.ModeWorkspaceWrite} {
		c := ceiling{max: m}
		out[m] = shaped{
			description: describe(t.background, c.clamp(t.sandbox), t.terminals, t.onTimeout == OnTimeoutBackground, c.escalations()) + limitsDescription(t.limits),
			schema:      schemaFor(t.background, t.terminals, c.escalations()),
		}
	}
	return out
}

// shape is the Tool.Shape of a confining registration: a session under a ceiling sees
// only the escalations within it, and its default mode as the ceiling makes it.
func (t *bashTool) shape(session *container.Session) (string, *tools.Schema) {
	c := t.ceiling(session)
	if !c.binds() {
		return "", nil
	}
	s := t.shaped[c.max]
	return s.description, s.schema
}
