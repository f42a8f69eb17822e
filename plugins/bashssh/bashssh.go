package bashssh

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/ssh"
	"github.com/dsh-dev/dsh/shell"
	"github.com/dsh-dev/dsh/shell/bashexec"
)

// Name is the plugin's catalog name, also the prefix of its error messages.
const Name = "bash-ssh"

// Config is bash-ssh's configuration: bash-local's keys (cwd, timeoutMs, maxTimeoutMs,
// maxOutputBytes, maxSpillBytes, graceMs) with the same defaults; cwd names a remote
// directory (absolute, or relative to the remote home; default the remote home).
type Config struct {
	bashexec.Config `yaml:",inline"`
	// Limits is refused: resource limits are enforced by this host's cgroups, which do
	// not reach the remote host (the key exists only to say so).
	Limits any `yaml:"limits"`
}

// Validate checks every key, with messages like "timeoutMs must be a positive finite
// number" (which users read as "bash-ssh: timeoutMs must be …"); a limits key is
// refused ("bash-ssh: limits are not enforced on a remote host: …").
func (c *Config) Validate() error {
	if c.Limits != nil {
		return bashexec.ErrRemoteLimits
	}
	return c.Config.Check()
}

// Plugin declares bash-ssh.
var Plugin = container.Define(container.Declaration[*Config]{
	Name:      Name,
	Inject:    container.Keys{ssh.Service},
	Provide:   container.Keys{shell.Service},
	Exclusive: container.Keys{shell.Service},
	Config:    func() *Config { return &Config{Config: bashexec.DefaultConfig()} },
	Apply: func(a *container.Activation, cfg *Config) error {
		host, err := container.Injected(a, ssh.Service)
		if err != nil {
			return err
		}
		ex, err := New(host, cfg)
		if err != nil {
			return err
		}
		return shell.Service.Provide(a, ex)
	},
})

// homeTimeout bounds learning the remote home (a connection attempt and one command).
const homeTimeout = 30 * time.Second

// Module registers Plugin in the catalog.
var Module = container.ModuleOf(Plugin)

// Executor is the executor the plugin provides: the shared core over the ssh service.
type Executor struct {
	*bashexec.Executor
	host *ssh.Host
}

var (
	_ shell.Executor = (*Executor)(nil)
	_ shell.Remote   = (*Executor)(nil)
)

// New returns the executor over host. Embedders may use it directly.
func New(host *ssh.Host, cfg *Config) (*Executor, error) {
	if host == nil {
		return nil, errors.New(Name + ": no ssh service")
	}
	ex, err := bashexec.New(spawner{host}, cfg.Config, bashexec.Options{
		Name: Name,
		// The base of relative workdirs and the default cwd: the remote home, learned
		// from the host once (a call fails if the host was never reachable).
		BaseDir: func() (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), homeTimeout)
			defer cancel()
			return host.Home(ctx)
		},
	})
	if err != nil {
		return nil, err
	}
	return &Executor{Executor: ex, host: host}, nil
}

// RemoteHost is "<user>@<address>": commands run there.
func (e *Executor) RemoteHost() string { return e.host.User() + "@" + e.host.Address() }

// spawner starts the core's commands through the ssh service.
type spawner struct{ host *ssh.Host }

// Terminals reports that commands can run under a (remote) terminal.
func (spawner) Terminals() bool { return true }

func (s spawner) Spawn(ctx context.Context, cmd bashexec.Command, lim bashexec.Limits) (bashexec.Process, error) {
	if len(cmd.Argv) != 3 || cmd.Argv[0] != "bash" || cmd.Argv[1] != "-c" {
		return nil, fmt.Errorf("cannot run %q remotely: only bash -c commands are supported", cmd.Argv)
	}
	p, err := s.host.Start(ctx, ssh.Spec{
		Command:  cmd.Argv[2],
		Dir:      cmd.Dir,
		Env:      cmd.Env,
		DshEnv:   cmd.DshEnv,
		Stdin:    cmd.Stdin,
		Stdout:   lim.Stdout,
		Stderr:   lim.Stderr,
		GraceMs:  lim.GraceMs,
		Deadline: lim.Deadline,
		Owner:    cmd.Owner,
		Terminal: cmd.Terminal,
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}
