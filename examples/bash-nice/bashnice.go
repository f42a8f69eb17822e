// Package bashnice is a worked example of an executor written outside the dsh module:
// bash-nice runs every command like bash-local, at a lower CPU priority (`nice`). It
// reuses dsh's public executor core, so the whole executor is its configuration and
// one Prepare hook; the conformance kit (bashnice_test.go) proves it honours the seam.
package bashnice

import (
	"context"
	"fmt"
	"strconv"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/shell"
	"github.com/dsh-dev/dsh/shell/bashexec"
)

// Name is the plugin's catalog name and the prefix of its messages (the container's for
// its config, the executor's for its calls).
const Name = "bash-nice"

// Config is bash-local's configuration plus the niceness.
type Config struct {
	bashexec.Config `yaml:",inline"`
	// Niceness is the `nice -n` adjustment, 1 (slightly lower priority) to 19 (lowest).
	Niceness int `yaml:"niceness"`
}

// Validate checks the shared keys (with the shared messages) and the niceness. The
// container names the plugin in front of each message ("bash-nice: niceness must …").
func (c *Config) Validate() error {
	if err := c.Config.Check(); err != nil {
		return err
	}
	if c.Niceness < 1 || c.Niceness > 19 {
		return fmt.Errorf("niceness must be between 1 and 19, got %d", c.Niceness)
	}
	return nil
}

// New returns the executor: the core's local spawner, with `nice -n N` in front of bash.
func New(sup *subprocess.Supervisor, cfg *Config) (*bashexec.Executor, error) {
	niceness := strconv.Itoa(cfg.Niceness)
	return bashexec.New(sup.Spawner(), cfg.Config, bashexec.Options{
		Name: Name,
		Prepare: func(_ context.Context, _ shell.ExecSpec, cmd *bashexec.Command) (bashexec.FinishFunc, error) {
			cmd.Argv = append([]string{"nice", "-n", niceness}, cmd.Argv...)
			return nil, nil
		},
	})
}

// Plugin declares bash-nice: a `shell` provider over the `subprocess` service.
var Plugin = container.Define(container.Declaration[*Config]{
	Name:      Name,
	Inject:    container.Keys{subprocess.Service},
	Provide:   container.Keys{shell.Service},
	Exclusive: container.Keys{shell.Service},
	Config:    func() *Config { return &Config{Config: bashexec.DefaultConfig(), Niceness: 10} },
	Apply: func(a *container.Activation, cfg *Config) error {
		sup, err := container.Injected(a, subprocess.Service)
		if err != nil {
			return err
		}
		ex, err := New(sup, cfg)
		if err != nil {
			return err
		}
		return shell.Service.Provide(a, ex)
	},
})

// Module registers Plugin in a dsh binary's catalog (cli.Main's extra options).
var Module = container.ModuleOf(Plugin)
