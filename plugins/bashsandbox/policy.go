package bashsandbox

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/shell"
)

// SandboxConfig is the part of bash-sandbox's configuration that bash-local does not
// have. The plugin's full config embeds it next to the executor's own keys
// (`yaml:",inline"`).
type SandboxConfig struct {
	// DefaultMode is the mode of calls with neither an approved escalation nor a session
	// override: "read-only" (default), "workspace-write" or "danger-full-access".
	DefaultMode string `yaml:"defaultMode"`
	// Network is "deny" (default: no socket reaches anything outside the sandbox in
	// the confined modes) or "allow".
	Network string `yaml:"network"`
	// WritableRoots are further directories (absolute, existing) that workspace-write
	// may modify.
	WritableRoots []string `yaml:"writableRoots"`
	// Namespaces is "auto" (default: the namespace backend where the host allows it,
	// else Landlock only) or "off" (Landlock only; status then names what is missing).
	Namespaces string `yaml:"namespaces"`
}

// Values of SandboxConfig.Namespaces.
const (
	NamespacesAuto = "auto"
	NamespacesOff  = "off"
)

// defaultSandboxConfig is the configuration with every default applied.
func defaultSandboxConfig() SandboxConfig {
	return SandboxConfig{DefaultMode: shell.ModeReadOnly, Network: NetworkDeny, Namespaces: NamespacesAuto}
}

// Validate checks every key; errors start with the key.
func (c *SandboxConfig) Validate() error {
	if shell.ModeRank(c.DefaultMode) < 0 {
		return fmt.Errorf("defaultMode must be one of %q, %q or %q, got %q",
			shell.ModeReadOnly, shell.ModeWorkspaceWrite, shell.ModeDangerFullAccess, c.DefaultMode)
	}
	if c.Network != NetworkDeny && c.Network != NetworkAllow {
		return fmt.Errorf("network must be %q or %q, got %q", NetworkDeny, NetworkAllow, c.Network)
	}
	for i, r := range c.WritableRoots {
		if !filepath.IsAbs(r) {
			return fmt.Errorf("writableRoots[%d] must be an absolute path, got %q", i, r)
		}
	}
	if c.Namespaces != NamespacesAuto && c.Namespaces != NamespacesOff {
		return fmt.Errorf("namespaces must be %q or %q, got %q", NamespacesAuto, NamespacesOff, c.Namespaces)
	}
	return nil
}

// Resolver is the `sandboxPolicy` service (shell.PolicyResolver).
type Resolver struct {
	defaultMode string
	root        string
	owner       any                   // key of the sessions' pinned workspaces (the Supervisor)
	check       func(ws string) error // the executor's CheckConfinement; nil: none
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
	r := &Resolver{defaultMode: defaultMode, root: root}
	r.owner = r
	return r, nil
}

// DefaultMode is the executor's configured default mode.
func (r *Resolver) DefaultMode() string { return r.defaultMode }

// Resolve returns one call's policy. Mode: requestedMode (an escalation the caller has
// already had approved) if set, else the session's SandboxMode override, else the
// default; an unknown mode is an error. WorkspaceRoot: the session's workspace (its
// Cwd, else the configured root), resolved once — absolute and canonical, symlinks
// resolved — the first time the session is seen, and pinned: a confined mode fails
// with a *WorkspaceMovedError when that path later resolves to another directory.
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
	p, err := r.pin(session)
	if err != nil {
		return shell.SandboxPolicy{}, err
	}
	if mode != shell.ModeDangerFullAccess {
		if err := p.check(); err != nil {
			return shell.SandboxPolicy{}, err
		}
	}
	return shell.SandboxPolicy{Mode: mode, WorkspaceRoot: p.path}, nil
}

// pin returns the pinned workspace of session (nil: calls without a session).
func (r *Resolver) pin(session *container.Session) (*pin, error) {
	id, root := "", r.root
	if session != nil {
		id = session.ID
		if session.Cwd != "" {
			root = session.Cwd
		}
	}
	return sessionFor(r.owner, sessionKeyID(id, root)).workspace(root)
}

// sessionKeyID is the registry id of a call's session: its id, or, for calls without
// one, the root they run in (a NUL cannot occur in either).
func sessionKeyID(id, root string) string {
	if id != "" {
		return id
	}
	return "\x00" + root
}
