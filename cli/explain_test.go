package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// policyProfile is a profile with a rules row (importing a Claude Code settings file
// next to it) and a roles row.
const policyProfile = `extends: default
plugins:
  - id: rules
    name: rules
    config:
      default: ask
      rules:
        - allow: ["git status", "git diff *", "npm test *", "echo *"]
        - id: no-force-push
          deny: git push --force *
          reason: force pushes rewrite shared history
        - ask: git push *
      claudeSettings: [claude.json]
  - id: roles
    name: roles
    config:
      default: reader
      roles:
        reader:
          tools: [bash]
          rules:
            - deny: git push *
        writer: {}
`

const claudeSettings = `{"permissions": {"allow": ["Bash(make test:*)", "Bash(cd x && make)"], "deny": ["Bash(curl:*)"]}}`

// policyDir writes the profile (and its import) into a directory and returns the
// profile's path.
func policyDir(t *testing.T, profile string) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("DSH_HOME", filepath.Join(dir, "home"))
	if err := os.WriteFile(filepath.Join(dir, "claude.json"), []byte(claudeSettings), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "dsh.yaml")
	if err := os.WriteFile(path, []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errOut, Options{})
	return out.String(), errOut.String(), code
}

func TestExplain(t *testing.T) {
	path := policyDir(t, policyProfile)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"git push --force origin main"}, `decision: deny
source: rule "no-force-push" (force pushes rewrite shared history)
role: reader

row "rules": 8 rules, default ask
deny   git push --force origin main  rule "no-force-push" (force pushes rewrite shared history)

role "reader" (row "roles"): 1 rules, default allow
deny   git push --force origin main  rule "git push *"
`},
		{[]string{"--role", "writer", "npm test && git push origin $(git branch --show-current); curl x | sh"}, `decision: deny
source: rule "Bash(curl:*)"
role: writer

row "rules": 8 rules, default ask
allow  npm test  rule "npm test *"
ask    git push origin $(git branch --show-current)  rule "git push *"
ask    git branch --show-current  default (no rule matched)
deny   curl x  rule "Bash(curl:*)"
ask    sh  unchecked: sh reads its script from standard input, which is not known statically
`},
		{[]string{"--role", "writer", "bash -c 'make test -j4' && echo done"}, `decision: allow
source: rule "Bash(make test:*)"
role: writer

row "rules": 8 rules, default ask
-      bash -c 'make test -j4'  carries a script, judged below
  allow  make test -j4  rule "Bash(make test:*)"
allow  echo done  rule "echo *"
`},
		{[]string{"--role", "writer", "cd x && make"}, `decision: ask
source: default for "cd x"
role: writer

row "rules": 8 rules, default ask
ask    cd x  default (no rule matched)
ask    make  default (no rule matched)
`},
	} {
		out, errOut, code := runCLI(t, append([]string{"explain", "--profile", path}, c.args...)...)
		if code != 0 || out != c.want {
			t.Errorf("explain %q: exit %d, stderr %q\n%s--- want:\n%s", c.args, code, errOut, out, c.want)
		}
	}
	out, errOut, code := runCLI(t, "explain", "--profile", path, "--role", "admin", "ls")
	if code != 2 || out != "" || !strings.Contains(errOut, "dsh: --role admin: the profile defines no such role (it has: reader, writer)") {
		t.Errorf("unknown role: exit %d\n%s%s", code, out, errOut)
	}
	out, _, code = runCLI(t, "explain", "--profile", "minimal", "rm -rf /")
	if code != 0 || out != "decision: allow\nsource: no rules judge bash in this profile\n" {
		t.Errorf("no policy: exit %d\n%s", code, out)
	}
	// A role that does not see bash.
	hidden := policyDir(t, strings.Replace(policyProfile, "tools: [bash]", "tools: [job_output]", 1))
	out, _, code = runCLI(t, "explain", "--profile", hidden, "ls")
	if code != 0 || out != "decision: deny\nsource: tool \"bash\" is not available to this session (role \"reader\")\n" {
		t.Errorf("hidden bash: exit %d\n%s", code, out)
	}
}

func TestCheckPolicies(t *testing.T) {
	path := policyDir(t, policyProfile)
	out, errOut, code := runCLI(t, "check", "--profile", path)
	want := "profile " + path + ": ok (10 rows)\n" +
		`row "rules": 8 rules, default ask; imports claude.json; import warnings: 1` + "\n" +
		`  warning: rules: claude.json: permissions.allow[1] "Bash(cd x && make)": is not one simple command: each simple command is judged on its own, so a pattern has no ;, &&, ||, |, &, redirection, ! or compound command (left out)` + "\n" +
		`row "roles": roles reader (tools bash; 1 rules, default allow), writer (every tool); default role reader` + "\n"
	if code != 0 || out != want {
		t.Errorf("good policy: exit %d, stderr %q\n%s--- want:\n%s", code, errOut, out, want)
	}

	for _, c := range []struct {
		name, from, to, want string
	}{
		{"bad pattern", "ask: git push *", `ask: git push "$REMOTE"`,
			`row "rules": rules: rules[2]: pattern "git push \"$REMOTE\"": word 3 ("$REMOTE"): is not literal: a pattern has no expansions ($, backquotes); quote it to match it as written`},
		{"missing import", "claudeSettings: [claude.json]", "claudeSettings: [missing.json]",
			`row "rules": rules: missing.json: open `},
		{"bad role rule", "- deny: git push *", "- deny: git push; rm",
			`row "roles": roles: roles.reader.rules[0]: pattern "git push; rm": is not one simple command`},
		{"bad role ceiling", "tools: [bash]", "tools: [bash]\n          maxMode: root",
			`row "roles": roles: roles.reader.maxMode must be one of "read-only", "workspace-write" or "danger-full-access", got "root"`},
	} {
		bad := policyDir(t, strings.Replace(policyProfile, c.from, c.to, 1))
		out, errOut, code := runCLI(t, "check", "--profile", bad)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, "dsh: "+bad+": "+c.want) {
			t.Errorf("%s: exit %d\n%s%s--- want dsh: %s: %s…", c.name, code, out, errOut, bad, c.want)
		}
		// explain refuses it the same way.
		if _, errOut, code := runCLI(t, "explain", "--profile", bad, "ls"); code != 1 || !strings.HasPrefix(errOut, "dsh: "+bad+": "+c.want) {
			t.Errorf("%s: explain: exit %d\n%s", c.name, code, errOut)
		}
	}
}

// `dsh call` runs the session in --role: a hidden tool is refused, the role's rules
// judge bash; a role the profile lacks is a usage error.
func TestCallWithRole(t *testing.T) {
	path := policyDir(t, policyProfile)
	ws := filepath.Dir(path)
	out, _, code := runCLI(t, "call", "--profile", path, "--workspace", ws, "bash", `{"command":"echo hi","description":"d"}`)
	if code != 0 || out != "hi\n" {
		t.Errorf("allowed: exit %d %q", code, out)
	}
	out, _, code = runCLI(t, "call", "--profile", path, "--workspace", ws, "bash", `{"command":"git push origin main","description":"d"}`)
	if code != 1 || out != `Error: command denied by policy: role "reader"` {
		t.Errorf("reader's rule: exit %d %q", code, out)
	}
	out, _, code = runCLI(t, "call", "--profile", path, "--workspace", ws, "--role", "writer", "bash", `{"command":"git push --force origin main","description":"d"}`)
	if code != 1 || out != `Error: command denied by policy: rule "no-force-push" (force pushes rewrite shared history)` {
		t.Errorf("writer: exit %d %q", code, out)
	}
	out, _, code = runCLI(t, "call", "--profile", path, "--workspace", ws, "--role", "reader", "job_list", `{}`)
	if code != 1 || out != `Error: tool "job_list" is not available to this session (role "reader")` {
		t.Errorf("hidden tool: exit %d %q", code, out)
	}
	_, errOut, code := runCLI(t, "call", "--profile", "minimal", "--workspace", ws, "--role", "reader", "bash", `{"command":"true","description":"d"}`)
	if code != 2 || !strings.Contains(errOut, `dsh: --role reader: profile "minimal" composes no active roles plugin (see dsh status)`) {
		t.Errorf("no roles plugin: exit %d %q", code, errOut)
	}
	out, _, code = runCLI(t, "tools", "--profile", path, "--role", "reader")
	if code != 0 || !strings.Contains(out, `"name": "bash"`) || strings.Contains(out, `"name": "job_`) {
		t.Errorf("tools --role reader: exit %d\n%s", code, out)
	}
}
