// Package workspaceenv is a worked example of a dsh plugin: a `bashEnv` contributor that
// gives every bash command $DSH_WORKSPACE (the calling session's workspace) and
// $DSH_PROJECT (a name from the profile).
//
// A plugin is one declaration (Plugin) and one fx registration (Module). It reaches other
// plugins only through the services it injects — here `bashEnv`, whose registry it adds
// a contributor to. The contributor is owned by the activation: when the row is disabled
// or reloaded, its keys disappear with it.
package workspaceenv

import (
	"context"
	"errors"

	"github.com/dsh-dev/dsh/container"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
)

// Config is the plugin's profile config.
type Config struct {
	// Project is the value of $DSH_PROJECT (default "dsh").
	Project string `yaml:"project"`
}

// Validate rejects an empty project name. The container names the plugin in front of
// the message: "workspace-env: project must be a non-empty string".
func (c *Config) Validate() error {
	if c.Project == "" {
		return errors.New("project must be a non-empty string")
	}
	return nil
}

// Plugin is the declaration a profile row mounts with `name: workspace-env`. Its
// config type is *Config: Apply receives the row's config decoded and validated.
var Plugin = container.Define(container.Declaration[*Config]{
	Name:   "workspace-env",
	Inject: container.Keys{shellenv.Service},
	Config: func() *Config { return &Config{Project: "dsh"} },
	Apply: func(a *container.Activation, cfg *Config) error {
		env, err := container.Injected(a, shellenv.Service)
		if err != nil {
			return err
		}
		return env.Register(a, shellenv.Contributor{
			Name: "workspace-env",
			Variables: map[string]string{
				"DSH_WORKSPACE": "the calling session's workspace directory",
				"DSH_PROJECT":   "the project name configured in the profile",
			},
			Resolve: func(_ context.Context, call shellenv.Call) (map[string]string, error) {
				vars := map[string]string{"DSH_PROJECT": cfg.Project}
				if call.Session != nil && call.Session.Cwd != "" {
					vars["DSH_WORKSPACE"] = call.Session.Cwd
				}
				return vars, nil
			},
		})
	},
})

// Module adds Plugin to a dsh binary's catalog.
var Module = container.ModuleOf(Plugin)
