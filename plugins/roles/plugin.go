package roles

import (
	"context"
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/rules"
	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/shell"
)

// Service is the key the roles plugin provides its Roles under. A composition has at
// most one.
var Service = container.NewKey[*Roles]("roles")

// Plugin declares the roles plugin.
var Plugin = container.Define(container.Declaration[*Config]{
	Name:      "roles",
	Inject:    container.Keys{tools.Service},
	Provide:   container.Keys{Service},
	Exclusive: container.Keys{Service},
	Config:    func() *Config { return &Config{} },
	Apply:     apply,
})

// Module registers Plugin in the catalog.
var Module = container.ModuleOf(Plugin)

// The tool whose command the roles' rules judge.
const bashTool = "bash"

func apply(a *container.Activation, cfg *Config) error {
	reg, err := container.Injected(a, tools.Service)
	if err != nil {
		return err
	}
	rs := New(cfg)
	if err := rs.checkExecutor(a); err != nil {
		return err
	}
	if err := reg.Restrict(a, tools.Restriction{Name: a.ID(), Hide: rs.hide}); err != nil {
		return err
	}
	mem := rules.NewMemory()
	a.OnSessionEnd(mem.Forget)
	if err := reg.AddGate(a, tools.Gate{
		Name:  a.ID(),
		Order: tools.OrderPolicy,
		Tools: []string{bashTool},
		Check: func(_ context.Context, _ string, call tools.Call) tools.Verdict {
			name, role, ok := rs.Of(call.Session)
			if !ok || role == nil || role.policy == nil {
				return tools.Verdict{}
			}
			return mem.Check(role.policy, call, fmt.Sprintf("role %q", name))
		},
	}); err != nil {
		return err
	}
	a.SetDetail(rs.Summary())
	return Service.Provide(a, rs)
}

// checkExecutor fails the row when a role's ceiling is below danger-full-access and the
// composition's executor does not confine commands (the ceiling could not be kept).
// The bash tool refuses such a role's calls too, for an executor swapped in later.
func (rs *Roles) checkExecutor(a *container.Activation) error {
	ex, ok := container.Lookup(a, shell.Service)
	if !ok || ex.SandboxMode() != "" {
		return nil
	}
	for _, name := range rs.cfg.names() {
		if m := rs.cfg.Roles[name].MaxMode; m != "" && m != shell.ModeDangerFullAccess {
			return fmt.Errorf("roles: role %q has maxMode %q, but the composition's executor does not confine commands: "+
				"the ceiling cannot be kept (compose bash-sandbox, or drop the role's maxMode)", name, m)
		}
	}
	return nil
}

// Roles is the `roles` service: the configured roles, and the role of a session. It is
// immutable (a reload provides a new one).
type Roles struct {
	cfg *Config
}

// New returns the roles of a validated config: what the plugin provides (dsh explain
// reads a profile's roles through it without composing).
func New(cfg *Config) *Roles { return &Roles{cfg: cfg} }

// Of returns session's role: its Role, else the default. ok is false when it has
// neither (roles do not restrict it). role is nil for a role the config does not
// define: such a session sees no tool.
func (rs *Roles) Of(session *container.Session) (name string, role *Role, ok bool) {
	if session != nil {
		name = session.Role
	}
	if name == "" {
		name = rs.cfg.Default
	}
	if name == "" {
		return "", nil, false
	}
	return name, rs.cfg.Roles[name], true
}

// Role returns the named role.
func (rs *Roles) Role(name string) (*Role, bool) {
	r, ok := rs.cfg.Roles[name]
	return r, ok
}

// Names lists the roles, sorted.
func (rs *Roles) Names() []string { return rs.cfg.names() }

// Default is the role of sessions that have none ("" for none).
func (rs *Roles) Default() string { return rs.cfg.Default }

// Ceiling returns the widest sandbox mode session's commands may run in and the role
// that sets it; maxMode is "" when the session has no ceiling. A role the config does
// not define is held to read-only.
func (rs *Roles) Ceiling(session *container.Session) (maxMode, role string) {
	name, r, ok := rs.Of(session)
	switch {
	case !ok:
		return "", ""
	case r == nil:
		return shell.ModeReadOnly, name
	}
	return r.MaxMode, name
}

// hide is the tools registry's restriction: a session of a role sees only its tools.
func (rs *Roles) hide(session *container.Session, tool string) (why string, hidden bool) {
	name, r, ok := rs.Of(session)
	if !ok || r != nil && r.Sees(tool) {
		return "", false
	}
	return fmt.Sprintf("role %q", name), true
}

// Summary is the roles in a few words, for status.
func (rs *Roles) Summary() string {
	parts := make([]string, 0, len(rs.cfg.Roles))
	for _, name := range rs.cfg.names() {
		parts = append(parts, name+" ("+rs.cfg.Roles[name].summary()+")")
	}
	s := "roles " + strings.Join(parts, ", ")
	if rs.cfg.Default != "" {
		return s + "; default role " + rs.cfg.Default
	}
	return s + "; sessions without a role are not restricted"
}

func (r *Role) summary() string {
	var parts []string
	switch {
	case r.Tools == nil:
		parts = append(parts, "every tool")
	case len(r.Tools) == 0:
		parts = append(parts, "no tool")
	default:
		parts = append(parts, "tools "+strings.Join(r.Tools, " "))
	}
	if r.MaxMode != "" {
		parts = append(parts, "maxMode "+r.MaxMode)
	}
	if r.policy != nil {
		parts = append(parts, fmt.Sprintf("%d rules, default %s", r.policy.Len(), r.policy.Default()))
	}
	return strings.Join(parts, "; ")
}
