package rules

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// Plugin declares the rules plugin: a gate of the pre-execute waterfall that judges
// the bash tool's command with the row's policy.
var Plugin = container.Define(container.Declaration[*Config]{
	Name:   "rules",
	Inject: container.Keys{tools.Service},
	Config: func() *Config { return &Config{} },
	Apply:  apply,
})

// Module registers Plugin in the catalog.
var Module = container.ModuleOf(Plugin)

// The tool the rules judge, and its argument.
const (
	bashTool   = "bash"
	commandArg = "command"
)

// SetProfileDir records the directory relative import paths are read from: the
// profile file's (container.ProfileRelative).
func (c *Config) SetProfileDir(dir string) { c.dir = dir }

// Validate compiles the policy — the rules, the default and every import — so that a
// bad pattern or import refuses the profile (`dsh check` names the file, the row, the
// rule's index and the pattern) instead of leaving bash unjudged.
func (c *Config) Validate() error {
	p, err := Compile(*c, c.dir)
	if err != nil {
		// The container prefixes the plugin's name.
		return errors.New(strings.TrimPrefix(err.Error(), "rules: "))
	}
	c.policy = p
	return nil
}

// Policy is the compiled policy, once Validate succeeded; nil before.
func (c *Config) Policy() *Policy { return c.policy }

func apply(a *container.Activation, cfg *Config) error {
	reg, err := container.Injected(a, tools.Service)
	if err != nil {
		return err
	}
	p := cfg.policy
	if p == nil {
		return errors.New("rules: the config was not validated")
	}
	for _, w := range p.Warnings() {
		a.Logger().Warn(w)
	}
	a.SetDetail(Summary(p, cfg))
	mem := NewMemory()
	a.OnSessionEnd(mem.Forget)
	return reg.AddGate(a, tools.Gate{
		Name:  a.ID(),
		Order: tools.OrderPolicy,
		Tools: []string{bashTool},
		Check: func(_ context.Context, _ string, call tools.Call) tools.Verdict {
			return mem.Check(p, call, "")
		},
	})
}

// Summary is a policy in a few words, for status: its rule count, default and imports,
// and how many import warnings were logged.
func Summary(p *Policy, cfg *Config) string {
	s := fmt.Sprintf("%d rules, default %s", p.Len(), p.Default())
	if files := append(append([]string(nil), cfg.ClaudeSettings...), cfg.CodexRules...); len(files) > 0 {
		s += "; imports " + strings.Join(files, ", ")
	}
	if n := len(p.Warnings()); n > 0 {
		s += fmt.Sprintf("; import warnings: %d", n)
	}
	return s
}
