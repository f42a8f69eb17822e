package rules_test

import (
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/plugins/rules"
	"mvdan.cc/sh/v3/syntax"
)

// FuzzJudge: every input gets a decision and a source, without a panic; one that
// does not parse is at least ask; the decision is the strictest of the commands'.
func FuzzJudge(f *testing.F) {
	for _, c := range corpus {
		f.Add(c.cmd)
	}
	for _, s := range []string{
		"", "\x00", "((", "$((", "${", "`", "<<EOF", "a[", "[[ -v", "eval", "bash -c", "xargs -I",
		"sudo -u", "timeout", "env -", "find . -exec", "trap", "alias x=", "mapfile -C",
		"declare -i x=$(cat f)", "echo ${a[$(ls)]}", "let x=y+1", "f() { f; }; f",
		strings.Repeat("eval 'eval ", 12) + "ls" + strings.Repeat("'", 12),
		strings.Repeat("$(", 50) + "ls" + strings.Repeat(")", 50),
	} {
		f.Add(s)
	}
	p, err := rules.Compile(corpusConfig, "")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		j := p.Judge(cmd)
		if j.Decision > rules.Deny {
			t.Fatalf("decision %d", j.Decision)
		}
		if !strings.HasPrefix(j.Source, `rule "`) && !strings.HasPrefix(j.Source, `default for "`) && !strings.HasPrefix(j.Source, `unchecked "`) {
			t.Fatalf("source %q", j.Source)
		}
		strictest, any := rules.Allow, false
		for _, c := range j.Commands {
			if !c.Carrier || c.Rule != "" {
				strictest, any = max(strictest, c.Decision), true
			}
		}
		if !any {
			strictest = p.Default()
		}
		if j.Decision != strictest {
			t.Fatalf("decision %s, the commands' strictest is %s", j.Decision, strictest)
		}
		if _, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(cmd), ""); err != nil && j.Decision < rules.Ask {
			t.Fatalf("%q does not parse (%v) but is %s", cmd, err, j.Decision)
		}
		if n := strings.Count(j.Explain(), "\n"); n != len(j.Commands) {
			t.Fatalf("Explain has %d lines for %d commands:\n%s", n, len(j.Commands), j.Explain())
		}
	})
}
