// Package bashexec is the public executor core that the bash executors share
// (bash-local, bash-sandbox, bash-ssh) and that an executor written in another module
// reuses: the common Config (the YAML keys cwd, timeoutMs, maxTimeoutMs,
// maxOutputBytes, maxSpillBytes and graceMs, with their defaults and messages),
// Resolve (the only place defaults and caps apply), and an Executor that projects one
// started process into the seam's shell.Execution — results, consuming reads with
// UTF-8 hold-back, the failed-start handle, copied results — exactly as the contract
// in package shell requires.
//
// Where the process runs is a Spawner's business: the subprocess Supervisor's
// (sup.Spawner()) runs `bash -c` on this host; a remote executor brings its own
// Spawner. What a call runs can be adjusted per call with Options.Prepare (a sandbox
// wraps or redirects the spawn and adds its facts to the result).
//
// A new executor is its config — bashexec.Config embedded inline (`yaml:",inline"`),
// with its own keys beside it — and one call:
//
//	type Config struct {
//		bashexec.Config `yaml:",inline"`
//	}
//	func (c *Config) Validate() error { return c.Config.Check() }
//
//	var Plugin = container.Define(container.Declaration[*Config]{
//		Name:      "bash-nice",
//		Inject:    container.Keys{subprocess.Service},
//		Provide:   container.Keys{shell.Service},
//		Exclusive: container.Keys{shell.Service}, // one executor per profile
//		Config:    func() *Config { return &Config{Config: bashexec.DefaultConfig()} },
//		Apply: func(a *container.Activation, cfg *Config) error {
//			sup, err := container.Injected(a, subprocess.Service)
//			…
//			ex, err := bashexec.New(sup.Spawner(), cfg.Config, bashexec.Options{
//				Name: "bash-nice",
//				Prepare: func(_ context.Context, _ shell.ExecSpec, cmd *bashexec.Command) (bashexec.FinishFunc, error) {
//					cmd.Argv = append([]string{"nice", "-n", "10"}, cmd.Argv...)
//					return nil, nil
//				},
//			})
//			…
//			return shell.Service.Provide(a, ex)
//		},
//	})
//
// and package shelltest proves it honours the seam (package toolbashtest, that the bash
// tool shows it to the model as it should).
//
// What it does not do: own processes (the subprocess and ssh services do, so an
// executor's reload kills nothing), confine (bash-sandbox's Prepare does), or render
// results for the model (the bash tool does).
package bashexec
