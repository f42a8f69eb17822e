package hooks

import (
	"context"
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/container"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// Plugin declares the hooks plugin: its PreToolUse hooks are gates of the waterfall,
// its PostToolUse hooks an observer that amends results.
var Plugin = container.Define(container.Declaration[*Config]{
	Name:   "hooks",
	Inject: container.Keys{tools.Service, subprocess.Service, shellenv.Service},
	Config: func() *Config { return &Config{} },
	Apply:  apply,
})

// Module registers Plugin in the catalog.
var Module = container.ModuleOf(Plugin)

func apply(a *container.Activation, cfg *Config) error {
	reg, err := container.Injected(a, tools.Service)
	if err != nil {
		return err
	}
	sup, err := container.Injected(a, subprocess.Service)
	if err != nil {
		return err
	}
	env, err := container.Injected(a, shellenv.Service)
	if err != nil {
		return err
	}
	for _, w := range cfg.warnings {
		a.Logger().Warn(w)
	}
	a.SetDetail(summary(cfg))
	r := &runner{sup: sup, env: env}
	for _, h := range cfg.pre {
		if err := reg.AddGate(a, tools.Gate{Name: a.ID(), Order: tools.OrderRewrite, Tools: h.tools, Check: r.gate(h)}); err != nil {
			return err
		}
	}
	if len(cfg.post) == 0 {
		return nil
	}
	return reg.Observe(a, tools.Observer{Name: a.ID(), Order: tools.OrderAmend, Observe: r.amend(cfg.post)})
}

// gate is h as a check of the waterfall: exit 2 denies with stderr as the reason; exit
// 0 answers with its JSON (or passes); any other end is its onError.
func (r *runner) gate(h *hook) func(ctx context.Context, tool string, call tools.Call) tools.Verdict {
	return func(ctx context.Context, tool string, call tools.Call) tools.Verdict {
		if !h.matches(tool) {
			return tools.Verdict{}
		}
		out := r.run(ctx, h, call.Session, tool, call.Arguments(), nil)
		if out.failure != "" {
			return h.onError(out.failure)
		}
		if out.code == 2 {
			return tools.Verdict{Decision: tools.Deny, Source: h.source(), Reason: out.stderr}
		}
		a, err := preAnswer([]byte(out.stdout))
		if err != nil {
			return h.onError("hook failed: " + err.Error())
		}
		return tools.Verdict{Decision: a.decision, Source: h.source(), Reason: a.reason, Args: a.input}
	}
}

// onError is a failed run's answer: a deny with the failure as the reason, or, with
// onError: pass, nothing.
func (h *hook) onError(failure string) tools.Verdict {
	if h.pass {
		return tools.Verdict{}
	}
	return tools.Verdict{Decision: tools.Deny, Source: h.source(), Reason: failure}
}

// amend runs the PostToolUse hooks that match a call that ran, in order; each line one
// says is appended to the result's text as `[hook "<name>": <line>]`.
func (r *runner) amend(hooks []*hook) func(ctx context.Context, ev *tools.Event) {
	return func(ctx context.Context, ev *tools.Event) {
		if !ev.Ran {
			return
		}
		for _, h := range hooks {
			if !h.matches(ev.Tool) {
				continue
			}
			for _, line := range r.post(ctx, h, ev) {
				appendLine(ev.Result, fmt.Sprintf("[hook %q: %s]", h.name, line))
			}
		}
	}
}

// post runs one PostToolUse hook and returns the lines it adds: exit 2's stderr, the
// reason of a block, additionalContext; a failure under onError deny says so.
func (r *runner) post(ctx context.Context, h *hook, ev *tools.Event) []string {
	out := r.run(ctx, h, ev.Session, ev.Tool, ev.Args, ev.Result)
	if out.failure == "" && out.code == 2 {
		return []string{orDefault(out.stderr, "blocked")}
	}
	var lines []string
	if out.failure == "" {
		var err error
		if lines, err = postLines([]byte(out.stdout)); err != nil {
			out.failure = "hook failed: " + err.Error()
		}
	}
	if out.failure != "" && !h.pass {
		return []string{out.failure}
	}
	return lines
}

// appendLine appends line to the result's text, after a newline when the text does
// not end in one (as the bash tool's markers are).
func appendLine(res *tools.Result, line string) {
	if res.Text != "" && !strings.HasSuffix(res.Text, "\n") {
		res.Text += "\n"
	}
	res.Text += line
}

// summary is the row's status detail: how many hooks of each event, and the imports.
func summary(cfg *Config) string {
	s := fmt.Sprintf("%s, %s", count(len(cfg.pre), eventPre), count(len(cfg.post), eventPost))
	if len(cfg.ClaudeSettings) > 0 {
		s += "; imports " + strings.Join(cfg.ClaudeSettings, ", ")
	}
	if n := len(cfg.warnings); n > 0 {
		s += fmt.Sprintf("; import warnings: %d", n)
	}
	return s
}

func count(n int, event string) string {
	if n == 1 {
		return "1 " + event + " hook"
	}
	return fmt.Sprintf("%d %s hooks", n, event)
}
