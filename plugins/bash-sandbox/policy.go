package bashsandbox

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/shell"
)

// SandboxConfig is the part of bash-sandbox's configuration that bash-local does not
// have. The plugin's full config embeds it next to the executor's own keys
// (`yaml:",inline"`).
type SandboxConfig struct {
	// DefaultMode is the mode of calls with neither an approved escalation nor a session
	// override: "read-only" (default), "workspace-write" or "danger-full-access".
	DefaultMode string `yaml:"defaultMode"`
	// Network is "deny" (default: no TCP connect or bind in the confined modes) or
	// "allow".
	Network string `yaml:"network"`
}

// defaultSandboxConfig is the configuration with every default applied.
func defaultSandboxConfig() SandboxConfig {
	return SandboxConfig{DefaultMode: shell.ModeReadOnly, Network: NetworkDeny}
}

// Validate checks both keys; errors name the key.
func (c *SandboxConfig) Validate() error {
	if shell.ModeRank(c.DefaultMode) < 0 {
		return fmt.Errorf("bash-sandbox: defaultMode must be one of %q, %q or %q, got %q",
			shell.ModeReadOnly, shell.ModeWorkspaceWrite, shell.ModeDangerFullAccess, c.DefaultMode)
	}
	if c.Network != NetworkDeny && c.Network != NetworkAllow {
		return fmt.Errorf("bash-sandbox: network must be %q or %q, got %q", NetworkDeny, NetworkAllow, c.Network)
	}
	return nil
}

// Resolver is the `sandboxPolicy` service (shell.PolicyResolver).
type Resolver struct {
	defaultMode string
	root        string
}

var _ shell.PolicyResolver = (*Resolver)(nil)

// newResolver returns the resolver for an executor whose default mode is defaultMode and
// whose configured root (its `cwd`, used for calls without a session workspace) is root;
// an empty root means the harness's working directory.
func newResolver(defaultMode, root string) (*Resolver, error) {
	if shell.ModeRank(defaultMode) < 0 {
		return nil, fmt.Errorf("bash-sandbox: unknown sandbox mode %q", defaultMode)
	}
	if root == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("bash-sandbox: working directory: %w", err)
		}
		root = wd
	}
	return &Resolver{defaultMode: defaultMode, root: root}, nil
}

// DefaultMode is the executor's configured default mode.
func (r *Resolver) DefaultMode() string { return r.defaultMode }

// Resolve returns one call's policy. Mode: requestedMode (an escalation the caller has
// already had approved) if set, else the session's SandboxMode override, else the
// default; an unknown mode is an error. WorkspaceRoot: the session's Cwd, else the
// configured root — made absolute and canonical (symlinks resolved), so that the
// sandbox and the process launch cannot read one spelling two ways; a root that does not
// resolve is an error (nothing is confined to a guess).
func (r *Resolver) Resolve(session *container.Session, requestedMode string) (shell.SandboxPolicy, error) {
	mode := r.defaultMode
	switch {
	case requestedMode != "":
		mode = requestedMode
	case session != nil && session.SandboxMode != "":
		mode = session.SandboxMode
	}
	if shell.ModeRank(mode) < 0 {
		return shell.SandboxPolicy{}, fmt.Errorf("bash-sandbox: unknown sandbox mode %q", mode)
	}
	root := r.root
	if session != nil && session.Cwd != "" {
		root = session.Cwd
	}
	canon, err := canonicalDir(root)
	if err != nil {
		return shell.SandboxPolicy{}, fmt.Errorf("bash-sandbox: workspace root: %w", err)
	}
	return shell.SandboxPolicy{Mode: mode, WorkspaceRoot: canon}, nil
}

// canonicalDir makes dir absolute, resolves every symlink and checks it is a directory.
func canonicalDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	canon, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(canon)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", canon)
	}
	return canon, nil
}
