package main_test

import (
	"os"
	"path/filepath"
	"testing"
)

// A good policy file: rules of its own, both imports (one Claude Code entry a pattern
// cannot express), and roles.
var goodPolicy = map[string]string{
	"policy.yaml": `extends: sandbox
plugins:
  - id: rules
    name: rules
    config:
      default: ask
      rules:
        - allow: ["git status", "git diff *", "npm test *"]
        - id: no-force-push
          deny: git push --force *
          reason: force pushes rewrite shared history
        - ask: git push *
      claudeSettings: [claude.json]
      codexRules: [codex.rules]
  - id: roles
    name: roles
    config:
      default: reader
      roles:
        reader:
          tools: [bash]
          maxMode: read-only
          rules:
            - deny: git push *
        writer: {}
`,
	"claude.json": `{"permissions": {"allow": ["Bash(make test:*)", "Bash(cd x && make)"], "deny": ["Bash(curl:*)"]}}
`,
	"codex.rules": `prefix_rule(
    pattern = ["rm", ["-rf", "-fr"]],
    decision = "forbidden",
    justification = "use trash instead",
    match = ["rm -rf build"],
    not_match = ["rm -r build"],
)
`,
}

// A bad one: a pattern with an expansion, and a Codex rule whose example disagrees.
var badPolicy = map[string]string{
	"bad.yaml": `extends: default
plugins:
  - id: rules
    name: rules
    config:
      rules:
        - allow: git status
        - deny: git push $REMOTE
      codexRules: [bad.rules]
`,
	"bad.rules": `prefix_rule(
    pattern = ["git", "push"],
    decision = "forbidden",
    match = ["git pull origin"],
)
`,
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestExplainAndCheckPolicies: `dsh check` and `dsh explain` through the binary, for a
// good and a bad policy file, byte for byte.
func TestExplainAndCheckPolicies(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, goodPolicy)
	writeFiles(t, dir, badPolicy)
	badErr := "dsh: " + filepath.Join(dir, "bad.yaml") + `: row "rules": rules: rules[1]: pattern "git push $REMOTE": word 3 ($REMOTE): is not literal: a pattern has no expansions ($, backquotes); quote it to match it as written
rules: bad.rules: prefix_rule example "git pull origin" does not match its pattern
`
	for _, c := range []struct {
		name           string
		args           []string
		stdout, stderr string
		code           int
	}{
		{"check good", []string{"check", "--profile", "policy.yaml"}, `profile policy.yaml: ok (10 rows)
row "rules": 8 rules, default ask; imports claude.json, codex.rules; import warnings: 1
  warning: rules: claude.json: permissions.allow[1] "Bash(cd x && make)": is not one simple command: each simple command is judged on its own, so a pattern has no ;, &&, ||, |, &, redirection, ! or compound command (left out)
row "roles": roles reader (tools bash; maxMode read-only; 1 rules, default allow), writer (every tool); default role reader
`, "", 0},
		{"check bad", []string{"check", "--profile", "bad.yaml"}, "", badErr, 1},
		{"explain writer", []string{"explain", "--profile", "policy.yaml", "--role", "writer", "npm test && git push origin $(git branch --show-current)"}, `decision: ask
source: rule "git push *"
role: writer

row "rules": 8 rules, default ask
allow  npm test  rule "npm test *"
ask    git push origin $(git branch --show-current)  rule "git push *"
ask    git branch --show-current  default (no rule matched)
`, "", 0},
		{"explain default role", []string{"explain", "--profile", "policy.yaml", "make test && rm -rf build"}, `decision: deny
source: rule "rm (-rf|-fr)" (use trash instead)
role: reader

row "rules": 8 rules, default ask
allow  make test  rule "Bash(make test:*)"
deny   rm -rf build  rule "rm (-rf|-fr)" (use trash instead)

role "reader" (row "roles"): 1 rules, default allow
allow  make test  default (no rule matched)
allow  rm -rf build  default (no rule matched)
`, "", 0},
		{"explain bad", []string{"explain", "--profile", "bad.yaml", "git status"}, "", badErr, 1},
		{"explain unknown role", []string{"explain", "--profile", "policy.yaml", "--role", "admin", "ls"}, "",
			"dsh: --role admin: the profile defines no such role (it has: reader, writer)\nRun 'dsh --help' for usage.\n", 2},
	} {
		stdout, stderr, code := runDsh(t, dir, c.args...)
		if stdout != c.stdout || stderr != c.stderr || code != c.code {
			t.Errorf("%s: exit %d (want %d)\nstdout:\n%s\nwant:\n%s\nstderr:\n%s\nwant:\n%s", c.name, code, c.code, stdout, c.stdout, stderr, c.stderr)
		}
	}
}
