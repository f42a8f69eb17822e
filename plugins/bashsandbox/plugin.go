package bashsandbox

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/prompt"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/shell"
	"github.com/dsh-dev/dsh/shell/bashexec"
)

// pluginName is the plugin's catalog name, also the prefix of its error messages.
const pluginName = "bash-sandbox"

// Config is bash-sandbox's configuration: bash-local's keys (cwd, timeoutMs,
// maxTimeoutMs, maxOutputBytes, maxSpillBytes, graceMs, with the same defaults),
// defaultMode, network, writableRoots and namespaces (SandboxConfig), workspaceRoot,
// and limits (bash-local's, with defaults, and tmpSize).
type Config struct {
	bashexec.Config `yaml:",inline"`
	SandboxConfig   `yaml:",inline"`
	// Limits are the resource limits (see Limits).
	Limits Limits `yaml:"limits"`
	// WorkspaceRoot is the directory workspace-write may modify for calls whose session
	// has no cwd (and for callers that pass no policy). Empty means cwd, else the
	// harness's working directory. Absolute; it must exist when the plugin starts.
	WorkspaceRoot string `yaml:"workspaceRoot"`
}

// DefaultConfig returns the configuration with every default applied.
func DefaultConfig() *Config {
	return &Config{Config: bashexec.DefaultConfig(), SandboxConfig: defaultSandboxConfig()}
}

// Validate checks every key; each message starts with the key (the container prefixes
// it with "bash-sandbox: ").
func (c *Config) Validate() error {
	if err := c.Config.Check(); err != nil {
		return err
	}
	if err := c.SandboxConfig.Validate(); err != nil {
		return err
	}
	if c.WorkspaceRoot != "" && !filepath.IsAbs(c.WorkspaceRoot) {
		return fmt.Errorf("workspaceRoot must be an absolute path, got %q", c.WorkspaceRoot)
	}
	if err := c.checkWritableRoots(); err != nil {
		return err
	}
	return c.Limits.check()
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

// canonicalRoot is the configured workspace root, canonical ("" for the harness's
// working directory); errors name the key that set it.
func (c *Config) canonicalRoot() (string, error) {
	root, err := c.root()
	if err != nil || root == "" {
		return root, err
	}
	canon, err := canonicalDir(root)
	if err != nil {
		key := "workspaceRoot"
		if c.WorkspaceRoot == "" {
			key = "cwd"
		}
		return "", fmt.Errorf("%s: %s: %w", pluginName, key, err)
	}
	return canon, nil
}

// canonicalWritableRoots are the writableRoots, canonical, each once, and the key that
// set each ("writableRoots[0]"); errors name the key and start with the plugin's name.
func (c *Config) canonicalWritableRoots() (roots, keys []string, err error) {
	for i, r := range c.WritableRoots {
		canon, err := canonicalDir(r)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %s: %w", pluginName, keyOf(i), err)
		}
		if !slices.Contains(roots, canon) {
			roots = append(roots, canon)
			keys = append(keys, keyOf(i))
		}
	}
	return roots, keys, nil
}

// Plugin declares bash-sandbox: the confining `shell` provider and the `sandboxPolicy`
// service. It also contributes the `sandbox:policy` prompt section.
var Plugin = container.Define(container.Declaration[*Config]{
	Name:      pluginName,
	Aliases:   []string{"@deepseek-ai/dsh-bash-sandbox"},
	Inject:    container.Keys{subprocess.Service, prompt.Service},
	Provide:   container.Keys{shell.Service, shell.PolicyService},
	Exclusive: container.Keys{shell.Service},
	Config:    DefaultConfig,
	Apply:     apply,
})

// Module registers Plugin in the catalog.
var Module = container.ModuleOf(Plugin)

func apply(a *container.Activation, cfg *Config) error {
	sup, err := container.Injected(a, subprocess.Service)
	if err != nil {
		return err
	}
	prompts, err := container.Injected(a, prompt.Service)
	if err != nil {
		return err
	}
	log := a.Logger()
	ex, resolver, sb, err := newExecutor(sup, cfg, log, a.ProfileFiles)
	if err != nil {
		return err
	}
	// Probe the backend now (once per process; cached), so that status tells what the
	// calls will meet rather than the first confined call finding out — in the
	// background when a server asked for it (ProbeInBackground).
	if !probed(cfg.Namespaces) && probeInBackground.Load() {
		a.SetDetail("sandbox: probing the backend (confined calls wait for a verdict)")
		a.Go(func(ctx context.Context) {
			if !awaitProbeTurn(ctx) {
				return
			}
			if err := settleBackend(a, sup, sb, cfg, chooseBackend(cfg.Namespaces)); err != nil {
				log.Error("bash-sandbox: " + err.Error())
				a.SetDetail(err.Error())
			}
		})
	} else if err := settleBackend(a, sup, sb, cfg, chooseBackend(cfg.Namespaces)); err != nil {
		return err
	}
	if prev, ok := container.ReplacedConfig[*Config](a); ok && prev != nil {
		for _, w := range widenings(&prev.SandboxConfig, &cfg.SandboxConfig) {
			log.Warn("profile reload widens confinement: " + w)
		}
	}
	if boxAhead.Load() && cfg.Namespaces != NamespacesOff {
		readyAhead(sup, cfg.Network)
	}
	// The sessions end with the Supervisor's (sessionFor); their boxes are not handed
	// to calls after this activation, which retires them (and a box started ahead that
	// no session took).
	a.Defer(sb.end)
	if err := shell.PolicyService.Provide(a, resolver); err != nil {
		return err
	}
	if err := shell.Service.Provide(a, ex); err != nil {
		return err
	}
	return prompts.Add(a, promptSection(resolver, a))
}

// settleBackend checks what the backend be cannot enforce under cfg (an error fails the
// row) and shows be in the row's status.
func settleBackend(a *container.Activation, sup *subprocess.Supervisor, sb *confiner, cfg *Config, be backend) error {
	if err := sb.checkStatic(be); err != nil {
		return err
	}
	detail := be.detail(cfg.DefaultMode, cfg.Network)
	if ld := limitsDetail(sup, sb.resources, sb.unenforced, !be.usable || be.namespaces()); ld != "" {
		detail += "; " + ld
	}
	a.SetDetail(detail)
	if be.usable {
		a.Logger().Info("bash-sandbox: " + detail)
	} else {
		a.Logger().Warn("bash-sandbox: " + detail)
	}
	return nil
}

// probeDelay is how long a background probe waits for a first confined call's box to
// give the verdict (confirmFirst) before it runs: so that it does not compete with the
// server's first answers, nor run at all when a call is that quick.
const probeDelay = 100 * time.Millisecond

// awaitProbeTurn waits until there is a verdict or probeDelay has passed; false when ctx
// ended first.
func awaitProbeTurn(ctx context.Context) bool {
	t := time.NewTimer(probeDelay)
	defer t.Stop()
	select {
	case <-awaitVerdict():
	case <-t.C:
	case <-ctx.Done():
		return false
	}
	return true
}

// probeInBackground is set by ProbeInBackground.
var probeInBackground atomic.Bool

// ProbeInBackground makes the rows applied from now on, when the backend has not been
// probed yet in this process, probe it in the background instead of before their apply
// returns: a server answers its first client without waiting for the probe (a box and
// a command in it, 10–20 ms), and the first confined call has its own box give the
// verdict (or waits for the probe).
// The row's status says "probing" until then; what the backend cannot enforce is then
// logged as an error and shown in the status (confined calls refuse it) instead of
// failing the row.
func ProbeInBackground() { probeInBackground.Store(true) }

// New returns the confining executor for cfg (as a shell.Executor) and its policy
// resolver (the `sandboxPolicy` service), over the processes of sup. It is what the
// plugin provides; embedders may use it directly. cfg must have passed Validate.
// profileFiles, when not nil, lists the files of the running profile (protected paths).
func New(sup *subprocess.Supervisor, cfg *Config, log *slog.Logger, profileFiles func() []string) (shell.Executor, *Resolver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", pluginName, err)
	}
	ex, r, _, err := newExecutor(sup, cfg, log, profileFiles)
	return ex, r, err
}

func newExecutor(sup *subprocess.Supervisor, cfg *Config, log *slog.Logger, profileFiles func() []string) (shell.Executor, *Resolver, *confiner, error) {
	if log == nil {
		log = slog.Default()
	}
	if profileFiles == nil {
		profileFiles = func() []string { return nil }
	}
	root, err := cfg.canonicalRoot()
	if err != nil {
		return nil, nil, nil, err
	}
	roots, rootKeys, err := cfg.canonicalWritableRoots()
	if err != nil {
		return nil, nil, nil, err
	}
	resolver, err := newResolver(cfg.DefaultMode, root)
	if err != nil {
		return nil, nil, nil, err
	}
	resolver.owner = sup
	res, unenforced, err := cfg.Limits.resources(sup)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpSize, err := cfg.Limits.tmpSize()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", pluginName, err)
	}
	s := &confiner{sup: sup, resolver: resolver, network: cfg.Network, namespaces: cfg.Namespaces, roots: roots, rootKeys: rootKeys,
		spillRoot: sup.Spool().Root(), log: log, profileFiles: profileFiles,
		resources: res, unenforced: unenforced, tmpSize: tmpSize}
	// Where this process makes its session directories and spill files, for other dsh
	// processes' boxes to mask (instances.go).
	registerDirs(log, os.TempDir(), s.spillRoot)
	resolver.check = s.checkWorkspace
	ex, err := bashexec.New(sup.Spawner(), cfg.Config, bashexec.Options{
		Name:        pluginName,
		SandboxMode: cfg.DefaultMode,
		Prepare:     s.prepare,
		Resources:   res,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return ex, resolver, s, nil
}
