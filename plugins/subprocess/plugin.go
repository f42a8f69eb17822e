package subprocess

import (
	"fmt"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/proc"
)

// Service is the key the Supervisor is provided under.
var Service = container.NewKey[*Supervisor]("subprocess")

// Isolation modes of Config.Isolation.
const (
	// IsolationAuto uses a cgroup v2 per command where the hierarchy is writable and
	// falls back to the process group alone elsewhere.
	IsolationAuto = "auto"
	// IsolationProcessGroup never uses cgroups.
	IsolationProcessGroup = "process-group"
)

// Config is the subprocess plugin's configuration.
type Config struct {
	// Isolation is "auto" (default) or "process-group".
	Isolation string `yaml:"isolation"`
	// SpillRoot is where the private spill directory is created (default: the
	// system temp directory).
	SpillRoot string `yaml:"spillRoot"`
	// SpillBudgetBytes bounds the total size of the spill files (default
	// proc.DefaultSpillBudgetBytes, 1 GiB); see Options.SpillBudgetBytes.
	SpillBudgetBytes int64 `yaml:"spillBudgetBytes"`
}

// Validate checks the isolation mode and the spill budget (the container prefixes its
// messages with "subprocess: ").
func (c *Config) Validate() error {
	if c.Isolation != IsolationAuto && c.Isolation != IsolationProcessGroup {
		return fmt.Errorf("isolation must be %q or %q, got %q", IsolationAuto, IsolationProcessGroup, c.Isolation)
	}
	if c.SpillBudgetBytes <= 0 {
		return fmt.Errorf("spillBudgetBytes must be a positive integer, got %d", c.SpillBudgetBytes)
	}
	return nil
}

// Plugin declares the subprocess service. Its activation owns one Supervisor; ending the
// activation (profile teardown, harness exit) closes it, which kills and reaps every
// process tree it still owns. Executor reloads never touch it. When a harness session
// ends, its processes (Spec.Owner = the session id) are killed and their spill files
// deleted (Supervisor.EndOwner).
var Plugin = container.Define(container.Declaration[*Config]{
	Name:    "subprocess",
	Aliases: []string{"@deepseek-ai/dsh-subprocess"},
	Provide: container.Keys{Service},
	Config: func() *Config {
		return &Config{Isolation: IsolationAuto, SpillBudgetBytes: proc.DefaultSpillBudgetBytes}
	},
	Apply: func(a *container.Activation, cfg *Config) error {
		sup := New(Options{
			DisableCgroups:    cfg.Isolation == IsolationProcessGroup,
			SpillRoot:         cfg.SpillRoot,
			SpillBudgetBytes:  cfg.SpillBudgetBytes,
			Logger:            a.Logger(),
			OnIsolationChange: func(iso string) { a.SetDetail("process isolation: " + iso) },
		})
		a.SetDetail("process isolation: " + sup.Isolation())
		a.Logger().Info("subprocess: process isolation", "mode", sup.Isolation())
		a.Defer(sup.Close)
		// A session's processes, spill files and cgroups go with it (Spec.Owner is the
		// session id).
		a.OnSessionEnd(sup.EndOwner)
		return Service.Provide(a, sup)
	},
})

// Module registers Plugin in the catalog.
var Module = container.ModuleOf(Plugin)
