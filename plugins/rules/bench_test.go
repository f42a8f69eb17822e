package rules_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/rules"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// benchPolicy has 200 rules: most name programs the command does not use, a few
// match it, some glob the program word.
func benchPolicy(b *testing.B) *rules.Policy {
	var rs []rules.Rule
	for i := range 190 {
		switch i % 3 {
		case 0:
			rs = append(rs, rules.Rule{Allow: fmt.Sprintf("tool%d run *", i)})
		case 1:
			rs = append(rs, rules.Rule{ID: fmt.Sprintf("deny-%d", i), Deny: fmt.Sprintf("danger%d --force *", i), Reason: "no"})
		default:
			rs = append(rs, rules.Rule{Ask: fmt.Sprintf("cli%d deploy * --prod", i)})
		}
	}
	rs = append(rs,
		rules.Rule{Allow: []any{"cat *", "grep *", "sort *", "uniq *", "head *"}},
		rules.Rule{Allow: []any{"awk *", "sed *", "tr *", "wc *"}},
		rules.Rule{Deny: "*-danger *"},
	)
	p, err := rules.Compile(rules.Config{Default: "ask", Rules: rs}, "")
	if err != nil {
		b.Fatal(err)
	}
	if p.Len() != 200 {
		b.Fatalf("%d rules", p.Len())
	}
	return p
}

const pipeline = `cat access.log | grep -v healthz | awk '{print $7}' | sed 's/?.*//' | sort | uniq -c | sort -rn | head -n 20 | tr a-z A-Z | wc -l`

func BenchmarkJudge(b *testing.B) {
	p := benchPolicy(b)
	if j := p.Judge(pipeline); j.Decision != rules.Allow || len(j.Commands) != 10 {
		b.Fatalf("%s %s, %d commands", j.Decision, j.Source, len(j.Commands))
	}
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		p.Judge(pipeline)
	}
	// The machine may be shared: the process's CPU time per call is reported too.
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchRows is benchPolicy's rules as a rules row's config.
func benchRows() []any {
	var rs []any
	for i := range 190 {
		switch i % 3 {
		case 0:
			rs = append(rs, map[string]any{"allow": fmt.Sprintf("tool%d run *", i)})
		case 1:
			rs = append(rs, map[string]any{"id": fmt.Sprintf("deny-%d", i), "deny": fmt.Sprintf("danger%d --force *", i), "reason": "no"})
		default:
			rs = append(rs, map[string]any{"ask": fmt.Sprintf("cli%d deploy * --prod", i)})
		}
	}
	return append(rs,
		map[string]any{"allow": []any{"cat *", "grep *", "sort *", "uniq *", "head *"}},
		map[string]any{"allow": []any{"awk *", "sed *", "tr *", "wc *"}},
		map[string]any{"deny": "*-danger *"},
	)
}

// BenchmarkWaterfall is a whole registry call of a 10-command pipeline through the rules
// row's gate (200 rules), to a bash tool that returns at once: validation, the
// waterfall, the judgement (made anew for a distinct command, kept for a repeated one).
func BenchmarkWaterfall(b *testing.B) {
	fake := container.Define(container.Declaration[container.NoConfig]{
		Name:   "fake-bash",
		Inject: container.Keys{tools.Service},
		Apply: func(a *container.Activation, _ container.NoConfig) error {
			reg, err := container.Injected(a, tools.Service)
			if err != nil {
				return err
			}
			return reg.Register(a, tools.Tool{Name: "bash",
				InputSchema: &tools.Schema{Type: "object", Required: []string{"command"},
					Properties: tools.Properties{{Name: "command", Schema: &tools.Schema{Type: "string"}}, {Name: "description", Schema: &tools.Schema{Type: "string"}}}},
				Execute: func(context.Context, tools.Call) (tools.Result, error) { return tools.Result{Text: "ok"}, nil },
			})
		},
	})
	cat, err := container.NewCatalog(tools.Plugin, rules.Plugin, fake)
	if err != nil {
		b.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{Logger: quiet})
	defer rt.Close()
	if err := rt.Compose("bench", []container.Row{{ID: "tools", Plugin: "tools"}, {ID: "bash", Plugin: "fake-bash"},
		{ID: "rules", Plugin: "rules", Config: map[string]any{"default": "ask", "rules": benchRows()}}}); err != nil {
		b.Fatal(err)
	}
	reg, _ := container.Lookup(rt, tools.Service)
	session := &container.Session{ID: "bench"}
	call := func(b *testing.B, command string) {
		args, _ := json.Marshal(map[string]any{"command": command, "description": "d"})
		if res := reg.Call(context.Background(), "bash", args, session); res.Text != "ok" {
			b.Fatal(res.Text)
		}
	}
	// Every call a command not seen before (the judgement is not kept): the whole cost.
	b.Run("distinct", func(b *testing.B) {
		b.ReportAllocs()
		cpu0, i := cpuTime(b), 0
		for b.Loop() {
			i++
			call(b, pipeline+" -c "+strconv.Itoa(i))
		}
		b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
	})
	b.Run("repeated", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := cpuTime(b)
		for b.Loop() {
			call(b, pipeline)
		}
		b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
	})
}

// BenchmarkTrueWithRules alternates a whole `bash` call of `true` (bash-local) in a
// composition with the rules row (200 rules) and in one without, and reports their
// medians and ratio: the cost of the waterfall beside a real command — the same
// command each time, and a distinct one each time.
func BenchmarkTrueWithRules(b *testing.B) {
	with := newStack(b, map[string]any{"default": "ask", "rules": append(benchRows(), map[string]any{"allow": "true *"})})
	without := newStack(b, nil)
	b.Run("repeated", func(b *testing.B) { pairTrue(b, with, without, func(int) string { return "true" }) })
	// Every call a command not seen before: the judgement is made each time.
	b.Run("distinct", func(b *testing.B) {
		pairTrue(b, with, without, func(i int) string { return "true " + strconv.Itoa(i) })
	})
}

// pairTrue alternates the command of call i on with and on without, and reports the
// medians and their ratio.
func pairTrue(b *testing.B, with, without *stack, command func(i int) string) {
	i := 0
	call := func(s *stack) time.Duration {
		t0 := time.Now()
		if res := s.bash(b, nil, command(i)); res.Text != "(no output)" {
			b.Fatal(res.Text)
		}
		return time.Since(t0)
	}
	var w, wo []time.Duration
	first := true
	for b.Loop() {
		// Which one goes first alternates: neither always follows the other's exit.
		if first {
			w = append(w, call(with))
			wo = append(wo, call(without))
		} else {
			wo = append(wo, call(without))
			w = append(w, call(with))
		}
		first = !first
		i++
	}
	mw, mwo := proctest.Median(w), proctest.Median(wo)
	b.ReportMetric(float64(mw.Nanoseconds()), "with-rules-median-ns")
	b.ReportMetric(float64(mwo.Nanoseconds()), "without-median-ns")
	b.ReportMetric(float64(mw)/float64(mwo), "with/without")
}
