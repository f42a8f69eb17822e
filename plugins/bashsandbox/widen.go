package bashsandbox

import (
	"fmt"
	"slices"

	"github.com/dsh-dev/dsh/shell"
)

// widenings lists how next — the configuration a profile reload applies to the row — is
// wider than prev, the one it replaces (container.ReplacedConfig): a wider default
// mode, the network allowed, an added writable root, namespaces turned off.
func widenings(prev, next *SandboxConfig) []string {
	var out []string
	if shell.ModeRank(next.DefaultMode) > shell.ModeRank(prev.DefaultMode) {
		out = append(out, fmt.Sprintf("bash-sandbox defaultMode %s → %s", prev.DefaultMode, next.DefaultMode))
	}
	if prev.Network == NetworkDeny && next.Network == NetworkAllow {
		out = append(out, "bash-sandbox network deny → allow")
	}
	for _, r := range next.WritableRoots {
		if !slices.Contains(prev.WritableRoots, r) {
			out = append(out, fmt.Sprintf("bash-sandbox writable root added: %s", r))
		}
	}
	if prev.Namespaces != NamespacesOff && next.Namespaces == NamespacesOff {
		out = append(out, "bash-sandbox namespaces auto → off (Landlock only)")
	}
	return out
}
