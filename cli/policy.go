package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/approval"
	"github.com/dsh-dev/dsh/plugins/roles"
	"github.com/dsh-dev/dsh/shell"
)

func addRoleFlag(cmd *cobra.Command, g *globalFlags) {
	cmd.Flags().StringVar(&g.role, "role", "", "the session's role (the profile's roles plugin): which tools it sees, its sandbox ceiling, its rules (default: the roles' default role)")
}

// checkRole refuses a --role the composition cannot apply (no roles plugin, a role it
// does not define) and a --sandbox-mode wider than the role's ceiling: the session
// would otherwise run with less restriction than the user asked for.
func (g *globalFlags) checkRole(rt *container.Runtime) error {
	if g.role == "" && g.sandboxMode == "" {
		return nil
	}
	rs, ok := container.Lookup(rt, roles.Service)
	if g.role != "" {
		if !ok {
			return usageError{fmt.Errorf("--role %s: profile %q composes no active roles plugin (see dsh status)", g.role, g.profile)}
		}
		if _, known := rs.Role(g.role); !known {
			return usageError{fmt.Errorf("--role %s: the profile defines no such role (it has: %s)", g.role, strings.Join(rs.Names(), ", "))}
		}
	}
	if !ok || g.sandboxMode == "" {
		return nil
	}
	if m, role := rs.Ceiling(&container.Session{Role: g.role}); m != "" && shell.ModeRank(g.sandboxMode) > shell.ModeRank(m) {
		return usageError{fmt.Errorf("--sandbox-mode %s: sandbox escalation to %q exceeds the %q role's ceiling %q", g.sandboxMode, g.sandboxMode, role, m)}
	}
	return nil
}

// ConfirmForSession asks on the controlling terminal whether to allow once, for the
// session, or not (container.SessionPrompter).
func (l *lazyTerminal) ConfirmForSession(ctx context.Context, message string) (container.Answer, error) {
	p, err := l.terminal()
	if err != nil {
		return "", err
	}
	return p.ConfirmForSession(ctx, message)
}

// terminal opens the controlling terminal on first use.
func (l *lazyTerminal) terminal() (*approval.TerminalPrompter, error) {
	if l.p == nil {
		p, closeFn, err := approval.OpenTerminal()
		if err != nil {
			return nil, err
		}
		l.p, l.closeFn = p, closeFn
	}
	return l.p, nil
}

var _ container.SessionPrompter = (*lazyTerminal)(nil)
