package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/proctest"
)

func TestCallPrintsTextExactly(t *testing.T) {
	ws := t.TempDir()
	out, errOut, code := runDsh(t, ws, "call", "bash", `{"command":"echo hi","description":"Say hi"}`)
	if out != "hi\n" || code != 0 || errOut != "" {
		t.Errorf("stdout %q stderr %q exit %d", out, errOut, code)
	}
	out, _, code = runDsh(t, ws, "call", "bash", `{"command":"echo failing; exit 3","description":"Fail on purpose"}`)
	if out != "failing\n[exit code: 3]" || code != 0 {
		t.Errorf("nonzero exit is a normal result: %q exit %d", out, code)
	}
	out, _, code = runDsh(t, ws, "call", "bash", `{"command":"","description":"Empty"}`)
	if out != "Error: invalid command: expected a non-empty string" || code != 1 {
		t.Errorf("validation error: %q exit %d", out, code)
	}
	out, _, code = runDsh(t, ws, "call", "--json", "bash", `{"command":"echo out; echo err >&2","description":"Write both streams"}`)
	var res struct {
		Text    string         `json:"text"`
		IsError bool           `json:"isError"`
		Value   map[string]any `json:"value"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 {
		t.Fatalf("--json: %q exit %d: %v", out, code, err)
	}
	if res.Text != "out\n[stderr]\nerr\n" || res.IsError || res.Value["kind"] != "foreground" {
		t.Errorf("--json = %+v", res)
	}
	out, _, code = runDsh(t, ws, "call", "--workspace", ws, "bash", `{"command":"pwd","description":"Print the directory"}`)
	if out != ws+"\n" || code != 0 {
		t.Errorf("--workspace: %q exit %d", out, code)
	}
	_, errOut, code = runDsh(t, ws, "call", "bash", `{not json`)
	if code != 1 {
		t.Errorf("bad JSON exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = runDsh(t, ws, "call")
	if code != 2 || !strings.Contains(errOut, "arg") {
		t.Errorf("no tool: exit %d stderr %q", code, errOut)
	}
}

func TestStatusToolsPromptCheck(t *testing.T) {
	ws := t.TempDir()
	out, _, code := runDsh(t, ws, "status", "--json")
	if code != 0 {
		t.Fatalf("status exit %d", code)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"profile", "rows", "lastReloadError"} {
		if _, ok := st[k]; !ok {
			t.Errorf("status JSON lacks %q: %s", k, out)
		}
	}
	rows := st["rows"].([]any)
	first := rows[0].(map[string]any)
	for _, k := range []string{"id", "plugin", "state", "missing", "error"} {
		if _, ok := first[k]; !ok {
			t.Errorf("row lacks %q: %v", k, first)
		}
	}

	out, _, code = runDsh(t, ws, "status")
	if code != 0 || !strings.Contains(out, "tool-bash") || !strings.Contains(out, "active") {
		t.Errorf("status table:\n%s", out)
	}

	// A profile whose bash tool has no executor: pending, naming what could provide it.
	p := filepath.Join(ws, "noexec.yaml")
	os.WriteFile(p, []byte("extends: default\nplugins:\n  - id: bash\n    disabled: true\n"), 0o644)
	out, _, code = runDsh(t, ws, "status", "--profile", p)
	if code != 1 || !strings.Contains(out, "pending") || !strings.Contains(out, "missing shell (provided by: bash-local") {
		t.Errorf("pending status (exit %d, want 1: the row can never activate):\n%s", code, out)
	}

	out, _, code = runDsh(t, ws, "tools", "--profile", "minimal")
	if code != 0 || !strings.Contains(out, `"name": "bash"`) || strings.Contains(out, "run_in_background") || strings.Contains(out, "job_output") {
		t.Errorf("minimal tools:\n%s", out)
	}

	out, _, code = runDsh(t, ws, "prompt")
	if code != 0 || !strings.Contains(out, "Check the [exit code: N] marker on every bash result; investigate failures before moving on.") {
		t.Errorf("prompt:\n%s", out)
	}

	out, _, code = runDsh(t, ws, "check")
	if code != 0 || out != "profile default: ok (8 rows)\n" {
		t.Errorf("check: %q exit %d", out, code)
	}
	bad := filepath.Join(ws, "bad.yaml")
	os.WriteFile(bad, []byte("plugins:\n  - id: bash\n    name: bash-local\n    config:\n      timeoutMs: -5\n  - id: extra\n    name: nope\n"), 0o644)
	_, errOut, code := runDsh(t, ws, "check", "--profile", bad)
	if code != 1 || !strings.Contains(errOut, bad) || !strings.Contains(errOut, `row "bash"`) ||
		!strings.Contains(errOut, "bash-local: timeoutMs must be a positive finite number") ||
		!strings.Contains(errOut, "module not found: nope") {
		t.Errorf("check bad profile: exit %d stderr:\n%s", code, errOut)
	}
	two := filepath.Join(ws, "two.yaml")
	os.WriteFile(two, []byte("extends: default\nplugins:\n  - id: bash2\n    name: bash-local\n"), 0o644)
	_, errOut, code = runDsh(t, ws, "check", "--profile", two)
	if code != 1 || !strings.Contains(errOut, `"bash"`) || !strings.Contains(errOut, `"bash2"`) {
		t.Errorf("two executors: exit %d stderr:\n%s", code, errOut)
	}
	_, errOut, code = runDsh(t, ws, "status", "--profile", filepath.Join(ws, "missing.yaml"))
	if code != 1 || !strings.Contains(errOut, "missing.yaml") {
		t.Errorf("missing profile: exit %d stderr %q", code, errOut)
	}
}

// What an operator meets with a broken profile: each mistake named once, with its file,
// line, row and key, and what to do about it.
func TestOperatorMessages(t *testing.T) {
	ws := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(ws, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, content, want string
	}{
		{"noexec.yaml", "extends: default\nplugins:\n  - id: bash\n    disabled: true\n",
			`dsh: builtin:default: row "tool-bash": can never activate: it injects "shell", which no enabled row provides ` +
				`(row "bash", which would, is disabled in ` + filepath.Join(ws, "noexec.yaml") + `) (plugins that provide it: bash-local, bash-sandbox, bash-ssh)` + "\n"},
		{"brace.yaml", "extends: default\nplugins:\n  - id: bash\n    config: {timeoutMs: 5\n  - id: jobs\n",
			"dsh: " + filepath.Join(ws, "brace.yaml") + ": line 5, column 3: invalid YAML: ',' or '}' must be specified\n" +
				"   2 | plugins:\n   3 |   - id: bash\n   4 |     config: {timeoutMs: 5\n>  5 |   - id: jobs\n         ^\n"},
		{"git.yaml", "extends: default\nplugins:\n  - id: git\n    name: tool-git\n",
			"dsh: " + filepath.Join(ws, "git.yaml") + `: row "git": module not found: tool-git (this dsh binary has no plugin of that name; ` +
				`it has: approval, bash-local, bash-sandbox, bash-ssh, hooks, jobs, prompt, roles, rules, session-log, shell-env, ssh, subprocess, tool-bash, tools. ` +
				`A plugin from another Go module is compiled into a dsh binary built with it: see the README, "Writing a plugin")` + "\n"},
		{"string.yaml", "extends: default\nplugins:\n  - id: bash\n    config: {timeoutMs: \"5000\"}\n",
			"dsh: " + filepath.Join(ws, "string.yaml") + `: row "bash": bash-local: timeoutMs must be a positive finite number, got the string "5000"` + "\n"},
		{"cap.yaml", "extends: default\nplugins:\n  - id: bash\n    config: {timeoutMs: 900000}\n",
			"dsh: " + filepath.Join(ws, "cap.yaml") + `: row "bash": bash-local: timeoutMs (900000) must be no greater than maxTimeoutMs (600000)` + "\n"},
	} {
		out, errOut, code := runDsh(t, ws, "check", "--profile", write(c.name, c.content))
		if code != 1 || out != "" || errOut != c.want {
			t.Errorf("check %s: exit %d, stdout %q, stderr:\n%s\nwant:\n%s", c.name, code, out, errOut, c.want)
		}
	}

	// --sandbox-mode under an executor that does not confine would be ignored: refused.
	out, errOut, code := runDsh(t, ws, "call", "--sandbox-mode", "read-only", "bash", `{"command":"touch x","description":"Touch a file"}`)
	if want := "dsh: --sandbox-mode read-only: profile \"default\" cannot apply it: its executor, bash-local, does not confine commands " +
		"(use a profile with bash-sandbox, e.g. --profile sandbox)\nRun 'dsh --help' for usage.\n"; code != 2 || out != "" || errOut != want {
		t.Errorf("--sandbox-mode under bash-local: exit %d stdout %q stderr %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(ws, "x")); err == nil {
		t.Error("the command ran")
	}

	// A misspelled argument is named to the model.
	out, _, code = runDsh(t, ws, "call", "bash", `{"command":"echo hi","description":"Say hi","timeout":300}`)
	if out != "[ignored unknown argument: timeout]\nhi\n" || code != 0 {
		t.Errorf("unknown argument: %q exit %d", out, code)
	}

	// status --json carries what the text form shows.
	out, _, code = runDsh(t, ws, "status", "--json")
	var st struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 {
		t.Fatalf("status --json: %v exit %d", err, code)
	}
	for _, row := range st.Rows {
		for _, k := range []string{"id", "plugin", "state", "missing", "error", "candidates", "providers", "detail", "since"} {
			if _, ok := row[k]; !ok {
				t.Errorf("row %v lacks %q", row["id"], k)
			}
		}
		switch row["id"] {
		case "subprocess":
			if d, _ := row["detail"].(string); !strings.HasPrefix(d, "process isolation: ") {
				t.Errorf("subprocess detail %q", d)
			}
		case "tool-bash":
			if p, _ := row["providers"].(map[string]any); p["shell"] != "bash" || p["tools"] != "tools" {
				t.Errorf("tool-bash providers %v", row["providers"])
			}
		}
	}
}

// On a terminal, `dsh call` escapes what the command printed (it can neither retitle
// the terminal nor hide text) and ends the output with a newline; piped, the bytes are
// exact. Confined and local alike: the output is the command's, whatever confines it.
func TestCallOnATerminalEscapesControls(t *testing.T) {
	script, err := exec.LookPath("script") // util-linux: runs a command on a new pty
	if err != nil {
		t.Skip("no script(1) to give dsh call a terminal")
	}
	const command = `printf '\033]2;TITLE\007\033[8mhidden\302\205x'`
	args, _ := json.Marshal(map[string]string{"command": command, "description": "Print controls"})
	for _, profile := range []string{"default", "sandbox"} {
		ws := t.TempDir()
		piped, _, code := runDsh(t, ws, "call", "--profile", profile, "bash", string(args))
		if piped != "\x1b]2;TITLE\x07\x1b[8mhidden\u0085x" || code != 0 {
			t.Errorf("%s, piped: %q (exit %d)", profile, piped, code)
		}
		line := proctest.Quote(dshBin) + " call --profile " + profile + " bash " + proctest.Quote(string(args))
		cmd := exec.Command(script, "-qec", line, "/dev/null")
		cmd.Dir = ws
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s, on a terminal: %v (%q)", profile, err, out)
		}
		if got := string(out); got != `\x1b]2;TITLE\x07\x1b[8mhidden\u0085x`+"\r\n" {
			t.Errorf("%s, on a terminal: %q", profile, got)
		}
		cmd = exec.Command(script, "-qec", line+" --json", "/dev/null")
		cmd.Dir = ws
		out, _ = cmd.Output()
		var res struct{ Text string }
		if strings.ContainsAny(string(out), "\x1b\x07\u0085") || json.Unmarshal(out, &res) != nil || res.Text != piped {
			t.Errorf("%s, --json on a terminal: %q", profile, out)
		}
	}
}
