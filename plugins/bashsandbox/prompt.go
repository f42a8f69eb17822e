package bashsandbox

import (
	"fmt"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/prompt"
	"github.com/dsh-dev/dsh/plugins/roles"
	"github.com/dsh-dev/dsh/shell"
)

// Prompt section identity (the sandbox:policy section).
const (
	promptSectionName  = "sandbox:policy"
	promptSectionOrder = 110
)

// policyPrompt is the `sandbox:policy` text for a session whose standing mode is mode and
// whose workspace root is root. It states the standing (capability-neutral) policy only;
// denials and escalation guidance belong to results and the bash tool.
//
//	read-only:          Current DSH file policy: read-only. Any available operation enforced by the DSH file sandbox may read files but may not modify them, including under the session workspace: "<root>". Only pseudo-devices such as /dev/null are writable.
//	workspace-write:    Current DSH file policy: workspace-write. Any available operation enforced by the DSH file sandbox may modify files under the session workspace: "<root>". Some platform temporary areas may also be writable.
//	danger-full-access: Current DSH file policy: danger-full-access. The DSH file sandbox enforces nothing: any available operation may modify files anywhere the harness user can, including under the session workspace: "<root>".
func policyPrompt(mode, root string) string {
	switch mode {
	case shell.ModeReadOnly:
		return fmt.Sprintf("Current DSH file policy: read-only. Any available operation enforced by the DSH file sandbox may read files but may not modify them, including under the session workspace: %q. Only pseudo-devices such as /dev/null are writable.", root)
	case shell.ModeWorkspaceWrite:
		return fmt.Sprintf("Current DSH file policy: workspace-write. Any available operation enforced by the DSH file sandbox may modify files under the session workspace: %q. Some platform temporary areas may also be writable.", root)
	case shell.ModeDangerFullAccess:
		return fmt.Sprintf("Current DSH file policy: danger-full-access. The DSH file sandbox enforces nothing: any available operation may modify files anywhere the harness user can, including under the session workspace: %q.", root)
	}
	return ""
}

// promptSection is the `sandbox:policy` section (order 110): each session sees its own
// standing mode (override, else default; at most its role's ceiling, from the roles
// service in services, when one is composed) and workspace root, from resolver.
func promptSection(resolver shell.PolicyResolver, services container.Services) prompt.Section {
	return prompt.Section{
		Name:  promptSectionName,
		Order: promptSectionOrder,
		Render: func(session *container.Session) string {
			mode, root := resolver.DefaultMode(), ""
			if p, err := resolver.Resolve(session, ""); err == nil {
				mode, root = p.Mode, p.WorkspaceRoot
			} else if session != nil {
				// The root does not resolve (yet): still state the mode, with the root
				// as the session spelled it.
				if shell.ModeRank(session.SandboxMode) >= 0 {
					mode = session.SandboxMode
				}
				root = session.Cwd
			}
			if services != nil {
				if rs, ok := container.Lookup(services, roles.Service); ok {
					if ceiling, _ := rs.Ceiling(session); ceiling != "" && shell.ModeRank(mode) > shell.ModeRank(ceiling) {
						mode = ceiling
					}
				}
			}
			return policyPrompt(mode, root)
		},
	}
}
