package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	if code != 0 || !strings.Contains(out, "pending") || !strings.Contains(out, "missing shell (provided by: bash-local") {
		t.Errorf("pending status:\n%s", out)
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
