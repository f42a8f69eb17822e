package bashlocal

import (
	"fmt"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/shell"
	"github.com/dsh-dev/dsh/shell/bashexec"
)

// Name is the plugin's catalog name, also the prefix of its error messages (the
// container's for its config, the executor's for its calls).
const Name = "bash-local"

// Config is bash-local's configuration: the shared executor keys (cwd, timeoutMs,
// maxTimeoutMs, maxOutputBytes, maxSpillBytes, graceMs) with the core's defaults, and
// the resource limits of its commands and sessions (none by default).
type Config struct {
	bashexec.Config `yaml:",inline"`
	// Limits are the resource limits (see docs/limits.md).
	Limits bashexec.LimitsConfig `yaml:"limits"`
}

// Validate checks every key, with messages like "timeoutMs must be a positive finite
// number" (which users read as "bash-local: timeoutMs must be …"), and that this host
// has the controllers the limits need ("limits.memory cannot be enforced on this
// host: …").
func (c *Config) Validate() error {
	if err := c.Config.Check(); err != nil {
		return err
	}
	r, err := c.Limits.Resources()
	if err != nil {
		return err
	}
	return subprocess.CheckHostLimits(r)
}

// Plugin declares bash-local.
var Plugin = container.Define(container.Declaration[*Config]{
	Name:      Name,
	Aliases:   []string{"@deepseek-ai/dsh-bash-local"},
	Inject:    container.Keys{subprocess.Service},
	Provide:   container.Keys{shell.Service},
	Exclusive: container.Keys{shell.Service},
	Config:    func() *Config { return &Config{Config: bashexec.DefaultConfig()} },
	Apply: func(a *container.Activation, cfg *Config) error {
		sup, err := container.Injected(a, subprocess.Service)
		if err != nil {
			return err
		}
		ex, err := New(sup, cfg)
		if err != nil {
			return err
		}
		if r := ex.ResourceLimits(); !r.IsZero() {
			a.SetDetail("limits: " + sup.LimitsMechanism(r))
		}
		return shell.Service.Provide(a, ex)
	},
})

// New returns the executor the plugin provides: the shared core running `bash -c` on
// this host through sup, under cfg's resource limits — which sup must be able to
// enforce ("bash-local: limits.memory cannot be enforced on this host: …").
// Embedders may use it directly.
func New(sup *subprocess.Supervisor, cfg *Config) (*bashexec.Executor, error) {
	r, err := cfg.Limits.Resources()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	if err := sup.CheckLimits(r); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return bashexec.New(sup.Spawner(), cfg.Config, bashexec.Options{Name: Name, Resources: r})
}

// Module registers Plugin in the catalog.
var Module = container.ModuleOf(Plugin)
