package rules_test

import (
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/plugins/rules"
)

func TestCompileErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  rules.Config
		want string
	}{
		{"unterminated quote", rules.Config{Rules: []rules.Rule{{Allow: "ls"}, {Allow: "ls"}, {Allow: "ls"}, {ID: "no-push", Deny: "git push '"}}},
			"rules: rules[3] (\"no-push\"): pattern \"git push '\": does not parse as shell words: 1:10: reached EOF without closing quote `'`"},
		{"a list", rules.Config{Rules: []rules.Rule{{Deny: "a && b"}}},
			`rules: rules[0]: pattern "a && b": is not one simple command: each simple command is judged on its own, so a pattern has no ;, &&, ||, |, &, redirection, ! or compound command`},
		{"an expansion", rules.Config{Rules: []rules.Rule{{Allow: []any{"ls", "git $X"}}}},
			`rules: rules[0]: pattern "git $X": word 2 ($X): is not literal: a pattern has no expansions ($, backquotes); quote it to match it as written`},
		{"an assignment", rules.Config{Rules: []rules.Rule{{Allow: "FOO=1 make"}}},
			`rules: rules[0]: pattern "FOO=1 make": starts with an assignment (NAME=value): assignments are removed before matching, so a pattern starts with the program`},
		{"empty", rules.Config{Rules: []rules.Rule{{Allow: "  "}}},
			`rules: rules[0]: pattern "  ": is empty`},
		{"two kinds", rules.Config{Rules: []rules.Rule{{ID: "x", Allow: "ls", Deny: "rm"}}},
			`rules: rules[0] ("x"): a rule has exactly one of allow, ask or deny (this one has allow and deny)`},
		{"no kind", rules.Config{Rules: []rules.Rule{{Reason: "why"}}},
			`rules: rules[0]: a rule has exactly one of allow, ask or deny (this one has none)`},
		{"empty list", rules.Config{Rules: []rules.Rule{{Deny: []any{}}}},
			`rules: rules[0]: deny is an empty list: give at least one pattern`},
		{"not a string", rules.Config{Rules: []rules.Rule{{Ask: []any{"ls", 3}}}},
			`rules: rules[0]: ask [1] must be a pattern (a string), got int`},
		{"default", rules.Config{Default: "maybe"},
			`rules: default must be one of "allow", "ask" or "deny", got "maybe"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := rules.Compile(c.cfg, "")
			if err == nil || err.Error() != c.want {
				t.Errorf("error = %v\nwant    %s", err, c.want)
			}
		})
	}
}

func TestCompileReportsEveryBadRule(t *testing.T) {
	_, err := rules.Compile(rules.Config{Rules: []rules.Rule{{Deny: "a |"}, {Allow: "ok"}, {Ask: []any{"$x", "b;c"}}}}, "")
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "rules: rules[0]: ") || !strings.HasPrefix(lines[2], `rules: rules[2]: pattern "b;c"`) {
		t.Errorf("errors:\n%v", err)
	}
}

func TestPatterns(t *testing.T) {
	for _, c := range []struct {
		pattern string
		cmd     string
		match   bool
	}{
		{"git push", "git push", true},
		{"git push", "git push origin", false},
		{"git push *", "git push", true},
		{"git push *", "git push origin main", true},
		{"git push *", "git pushx", false},
		{"git * main", "git push main", true},
		{"git * main", "git push origin main", false},
		{"rm *.tmp", "rm a.tmp", true},
		{"rm *.tmp", "rm a.go", false},
		{"ls '*'", "ls '*'", true},
		{"ls '*'", "ls x", false},
		{`ls \*`, "ls '*'", true},
		{"echo 'a b'", `echo "a b"`, true},
		{"echo 'a b'", "echo a b", false},
		{"npm run test:*", "npm run test:unit", true},
		{"*", "anything at all", true},
		{"* --force", "git --force", true},
		{"./build.sh *", "./build.sh -j4", true},
		{"npm test *", "npm test $X", true},
		{"npm test $'\\x2a'", "npm test '*'", true},
	} {
		p, err := rules.Compile(rules.Config{Default: "ask", Rules: []rules.Rule{{Allow: c.pattern}}}, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Judge(c.cmd).Decision == rules.Allow; got != c.match {
			t.Errorf("pattern %q on %q: match = %v, want %v", c.pattern, c.cmd, got, c.match)
		}
	}
}

func TestPolicyFacts(t *testing.T) {
	p, err := rules.Compile(rules.Config{Default: "deny", Rules: []rules.Rule{{Allow: []any{"a", "b"}}, {Deny: "c"}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if p.Len() != 3 || p.Default() != rules.Deny {
		t.Errorf("Len %d Default %s", p.Len(), p.Default())
	}
	empty, err := rules.Compile(rules.Config{}, "")
	if err != nil {
		t.Fatal(err)
	}
	if j := empty.Judge("anything"); j.Decision != rules.Allow || j.Source != `default for "anything"` {
		t.Errorf("empty policy: %s %s", j.Decision, j.Source)
	}
}
