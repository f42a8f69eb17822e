package bashsandbox

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/prompt"
	"github.com/dsh-dev/dsh/plugins/shell"
	"github.com/dsh-dev/dsh/plugins/shell/bashexec"
	"github.com/dsh-dev/dsh/plugins/subprocess"
)

// pluginName is the plugin's catalog name, also the prefix of its error messages.
const pluginName = "bash-sandbox"

// Config is bash-sandbox's configuration: bash-local's keys (cwd, timeoutMs,
// maxTimeoutMs, maxOutputBytes, maxSpillBytes, graceMs, with the same defaults),
// defaultMode and network (SandboxConfig), and workspaceRoot.
type Config struct {
	bashexec.Config `yaml:",inline"`
	SandboxConfig   `yaml:",inline"`
	// WorkspaceRoot is the directory workspace-write may modify for calls whose session
	// has no cwd (and for callers that pass no policy). Empty means cwd, else the
	// harness's working directory. Absolute; it must exist when the plugin starts.
	WorkspaceRoot string `yaml:"workspaceRoot"`
}

// DefaultConfig returns the configuration with every default applied.
func DefaultConfig() *Config {
	return &Config{Config: bashexec.DefaultConfig(), SandboxConfig: defaultSandboxConfig()}
}

// InvalidValue words a wrongly typed number like the other messages about its key.
func (c *Config) InvalidValue(key, got string) error {
	return c.Config.InvalidValue(pluginName, key, got)
}

// Validate checks every key; each message starts "bash-sandbox: <key>".
func (c *Config) Validate() error {
	if err := c.Config.Check(pluginName); err != nil {
		return err
	}
	if err := c.SandboxConfig.Validate(); err != nil {
		return err
	}
	if c.WorkspaceRoot != "" && !filepath.IsAbs(c.WorkspaceRoot) {
		return fmt.Errorf("%s: workspaceRoot must be an absolute path, got %q", pluginName, c.WorkspaceRoot)
	}
	return nil
}

// root is the configured workspace root before canonicalisation: workspaceRoot, else
// cwd (absolute), else "" for the harness's working directory.
func (c *Config) root() (string, error) {
	if c.WorkspaceRoot != "" {
		return c.WorkspaceRoot, nil
	}
	if c.Cwd == "" {
		return "", nil
	}
	abs, err := filepath.Abs(c.Cwd)
	if err != nil {
		return "", fmt.Errorf("%s: cwd: %w", pluginName, err)
	}
	return abs, nil
}

// Plugin declares bash-sandbox: the confining `shell` provider and the `sandboxPolicy`
// service. It also contributes the `sandbox:policy` prompt section.
var Plugin = container.Plugin{
	Name:    pluginName,
	Aliases: []string{"@deepseek-ai/dsh-bash-sandbox"},
	Inject:  []string{subprocess.Service, prompt.Service},
	Provide: []string{shell.Service, shell.PolicyService},
	Config:  func() any { return DefaultConfig() },
	Apply:   apply,
}

// Module registers Plugin in the catalog.
var Module = container.Declare(Plugin)

func apply(ctx *container.Context, config any) error {
	cfg := config.(*Config)
	sup, err := container.Injected[*subprocess.Supervisor](ctx, subprocess.Service)
	if err != nil {
		return err
	}
	prompts, err := container.Injected[*prompt.Registry](ctx, prompt.Service)
	if err != nil {
		return err
	}
	ex, resolver, err := newExecutor(sup, cfg, ctx.Logger())
	if err != nil {
		return err
	}
	// Probe the backend now (once per process; cached), so that status tells what the
	// calls will meet rather than the first confined call finding out.
	detail, usable := backendDetail(cfg)
	ctx.SetDetail(detail)
	if usable {
		ctx.Logger().Info("bash-sandbox: " + detail)
	} else {
		ctx.Logger().Warn("bash-sandbox: " + detail)
	}
	if err := ctx.Provide(shell.PolicyService, resolver); err != nil {
		return err
	}
	if err := ctx.Provide(shell.Service, ex); err != nil {
		return err
	}
	return prompts.Add(ctx, promptSection(resolver))
}

// backendDetail is the status line of the row: the backend and what it enforces, or why
// confined calls fail closed.
func backendDetail(cfg *Config) (detail string, usable bool) {
	r := Probe()
	if !r.Usable {
		return fmt.Sprintf("sandbox backend unavailable: calls in %s or %s mode fail closed (%s)",
			shell.ModeReadOnly, shell.ModeWorkspaceWrite, r.Reason), false
	}
	enf := Enforcement(LaunchPolicy{Mode: shell.ModeReadOnly, Network: cfg.Network})
	return fmt.Sprintf("sandbox: %s ABI %d, default mode %s, network %s, enforcement %s",
		r.Backend, r.ABI, cfg.DefaultMode, cfg.Network, enf), true
}

// New returns the confining executor for cfg (as a shell.Executor) and its policy
// resolver (the `sandboxPolicy` service), over the processes of sup. It is what the
// plugin provides; embedders may use it directly. cfg must have passed Validate.
func New(sup *subprocess.Supervisor, cfg *Config, log *slog.Logger) (shell.Executor, *Resolver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	return newExecutor(sup, cfg, log)
}

func newExecutor(sup *subprocess.Supervisor, cfg *Config, log *slog.Logger) (shell.Executor, *Resolver, error) {
	if log == nil {
		log = slog.Default()
	}
	root, err := cfg.root()
	if err != nil {
		return nil, nil, err
	}
	if root != "" {
		canon, err := canonicalDir(root)
		if err != nil {
			key := "workspaceRoot"
			if cfg.WorkspaceRoot == "" {
				key = "cwd"
			}
			return nil, nil, fmt.Errorf("%s: %s: %w", pluginName, key, err)
		}
		root = canon
	}
	resolver, err := newResolver(cfg.DefaultMode, root)
	if err != nil {
		return nil, nil, err
	}
	s := &sandbox{resolver: resolver, network: cfg.Network, log: log}
	ex, err := bashexec.New(bashexec.Local(sup), cfg.Config, bashexec.Options{
		Name:        pluginName,
		SandboxMode: cfg.DefaultMode,
		Prepare:     s.prepare,
	})
	if err != nil {
		return nil, nil, err
	}
	return ex, resolver, nil
}

// sandbox confines the commands of one executor.
type sandbox struct {
	resolver *Resolver
	network  string
	log      *slog.Logger
}

// prepare decides how one call runs: its policy is spec.Sandbox (tool-bash resolves it
// for the calling session, with an approved escalation) or, without one, the default
// policy of a call without a session. danger-full-access runs bash directly; the
// confined modes need a usable backend — otherwise Execute fails with the fail-closed
// error and nothing runs — and run bash through the launcher. The returned function
// adds the sandbox facts to the result.
func (s *sandbox) prepare(_ context.Context, spec shell.ExecSpec, cmd *bashexec.Command) (bashexec.FinishFunc, error) {
	var policy shell.SandboxPolicy
	if spec.Sandbox != nil {
		policy = *spec.Sandbox
	} else {
		p, err := s.resolver.Resolve(nil, "")
		if err != nil {
			return nil, err
		}
		policy = p
	}
	mode := policy.Mode
	switch mode {
	case shell.ModeDangerFullAccess:
		return func(res *shell.RunResult) { res.Sandbox = sandboxFacts(mode, "", *res) }, nil
	case shell.ModeReadOnly, shell.ModeWorkspaceWrite:
	default:
		return nil, fmt.Errorf("%s: unknown sandbox mode %q", pluginName, mode)
	}
	if err := checkBackend(mode); err != nil {
		s.log.Warn("bash-sandbox: refusing to run a command unconfined", "mode", mode, "err", err)
		return nil, err
	}
	lp, err := NewLaunchPolicy(policy, s.network)
	if err != nil {
		return nil, err
	}
	argv, err := LauncherArgv(lp, cmd.Argv)
	if err != nil {
		return nil, err
	}
	cmd.Argv = argv
	enforcement := Enforcement(lp)
	return func(res *shell.RunResult) { res.Sandbox = sandboxFacts(mode, enforcement, *res) }, nil
}
