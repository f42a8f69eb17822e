package rules_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/plugins/rules"
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
