package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// auditProfile is the sandbox profile with a rule that denies rm and a session-log row
// (maxBytes when not 0).
func auditProfile(t *testing.T, dir string, maxBytes int) string {
	t.Helper()
	cfg := ""
	if maxBytes > 0 {
		cfg = fmt.Sprintf("\n    config:\n      maxBytes: %d", maxBytes)
	}
	profile := `extends: sandbox
plugins:
  - id: rules
    name: rules
    config:
      rules:
        - id: no-rm
          deny: rm *
  - id: session-log
    name: session-log` + cfg + `
  - id: hooks
    name: hooks
    config:
      preToolUse:
        - command: cat > ` + filepath.Join(dir, "payload.json") + "\n"
	path := filepath.Join(dir, "dsh.yaml")
	if err := os.WriteFile(path, []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The audit log through `dsh serve`: after an allowed call, a denied one, an approved
// escalation, a timeout and a background job, the session's JSONL holds exactly those
// records with the documented fields, and no output or environment; DSH_SESSION_JSONL
// names it; the session's confined commands read it and cannot write it; another
// session's commands cannot see it.
func TestServeAuditLog(t *testing.T) {
	ws, home, cfg := t.TempDir(), t.TempDir(), t.TempDir()
	profile := auditProfile(t, cfg, 0)
	accept := func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept"}, nil
	}
	env := []string{"DSH_HOME=" + home}
	c := startServe(t, clientOptions{elicit: accept, env: env}, "--profile", profile, "--sandbox-mode", "read-only", "--workspace", ws)
	bash := func(args map[string]any) string {
		t.Helper()
		args["description"] = "Run an audit test"
		text, _, _ := c.call(t, "bash", args)
		return text
	}
	sessions := filepath.Join(home, "sessions")
	path := strings.TrimSuffix(bash(map[string]any{"command": `printf '%s\n' "$DSH_SESSION_JSONL"`}), "\n")
	if filepath.Dir(path) != sessions || !strings.HasSuffix(path, ".jsonl") {
		t.Fatalf("DSH_SESSION_JSONL = %q", path)
	}
	id := strings.TrimSuffix(filepath.Base(path), ".jsonl")
	var payload map[string]any
	if data, _ := os.ReadFile(filepath.Join(cfg, "payload.json")); json.Unmarshal(data, &payload) != nil || payload["transcript_path"] != path {
		t.Errorf("a hook's transcript_path: %v, want %q", payload, path)
	}
	if got := bash(map[string]any{"command": `grep -c '"type":"session"' "$DSH_SESSION_JSONL"; ls ` + sessions}); got != "1\n"+id+".jsonl\n" {
		t.Errorf("reading the own log: %q", got)
	}
	if got := bash(map[string]any{"command": `echo forged >> "$DSH_SESSION_JSONL"`}); !strings.Contains(got, "Read-only file system") {
		t.Errorf("writing the own log: %q", got)
	}
	if got := bash(map[string]any{"command": "rm -rf build"}); got != `Error: command denied by policy: rule "no-rm"` {
		t.Errorf("denied: %q", got)
	}
	if got := bash(map[string]any{"command": "touch marker", "sandbox_permissions": "workspace-write",
		"justification": "The test needs a marker in the workspace."}); got != "(no output)" {
		t.Errorf("escalation: %q", got)
	}
	if got := bash(map[string]any{"command": "sleep 30", "timeoutMs": 300}); !strings.Contains(got, "[timed out after 300ms]") {
		t.Errorf("timeout: %q", got)
	}
	started := bash(map[string]any{"command": "printf 'job-%s' finished", "run_in_background": true})
	job := strings.TrimPrefix(started, "started background job ")
	if out, _, _ := c.call(t, "job_output", map[string]any{"job_id": job, "wait": true, "timeout_ms": 20000}); !strings.Contains(out, "job-finished") {
		t.Fatalf("job output %q", out)
	}

	// Another session (another server, the same dsh home) sees nothing of it.
	other := startServe(t, clientOptions{env: env}, "--profile", profile, "--workspace", t.TempDir())
	text, _, _ := other.call(t, "bash", map[string]any{"command": "ls " + sessions + "; cat " + path, "description": "Look at another session's log"})
	if listing, _, _ := strings.Cut(text, "[stderr]"); !strings.Contains(text, "No such file or directory") || strings.Contains(listing, id) {
		t.Errorf("another session reads this one's log: %q", text)
	}
	other.Close()

	c.Close()
	_ = c.cmd.Wait()
	recs := readJSONL(t, path)
	var kinds []string
	for _, r := range recs {
		k := r["type"].(string)
		switch k {
		case "call":
			k += ":" + r["tool"].(string) + ":" + r["decision"].(map[string]any)["result"].(string)
		case "job":
			k += ":" + r["event"].(string)
		}
		kinds = append(kinds, k)
	}
	want := []string{"session", "call:bash:allow", "call:bash:allow", "call:bash:allow", "call:bash:deny", "call:bash:allow",
		"call:bash:allow", "job:started", "call:bash:allow", "job:finished", "call:job_output:allow"}
	if !slices.Equal(kinds, want) && !slices.Equal(kinds, append(append(slices.Clone(want[:8]), "call:bash:allow", "call:job_output:allow"), "job:finished")) {
		t.Fatalf("records %q", kinds)
	}
	for _, r := range recs {
		k := keysOf(r)
		switch r["type"] {
		case "session":
			if k != "profile role session ts type version workspace" || r["session"] != id || r["workspace"] != ws || r["profile"] != profile {
				t.Errorf("session record %v", r)
			}
		case "call":
			if k != "arguments decision result session tool ts type" && k != "approval arguments decision result session tool ts type" {
				t.Errorf("call record keys %q", k)
			}
			if rk := keysOf(r["result"].(map[string]any)); rk != "durationMs exitCode isError limit signal spill stderrBytes stdoutBytes timedOut" {
				t.Errorf("result keys %q", rk)
			}
		case "job":
			if k != "detail event job session status ts type" || r["job"] != job {
				t.Errorf("job record %v", r)
			}
		}
	}
	calls := filterType(recs, "call")
	if d := calls[3]["decision"].(map[string]any); d["source"] != `rule "no-rm"` {
		t.Errorf("the denial's source %v", d)
	}
	escalated := calls[4]
	if escalated["approval"] != "allowed-once" || escalated["arguments"].(map[string]any)["sandbox_permissions"] != "workspace-write" {
		t.Errorf("the escalation %v", escalated)
	}
	if res := calls[5]["result"].(map[string]any); res["timedOut"] != true || res["signal"] != "SIGTERM" || res["exitCode"] != nil {
		t.Errorf("the timeout %v", res)
	}
	if res := calls[0]["result"].(map[string]any); res["exitCode"] != float64(0) || res["stdoutBytes"] != float64(len(path)+1) {
		t.Errorf("the first call %v", res)
	}
	if fin := filterType(recs, "job")[1]; fin["status"] != "completed" || fin["detail"] != "exit code: 0" {
		t.Errorf("the job's finish %v", fin)
	}
	data, _ := os.ReadFile(path)
	for _, leak := range []string{"job-finished", path, "Read-only file system", home + "/serve-token"} {
		if strings.Contains(string(data), leak) {
			t.Errorf("the log holds %q", leak)
		}
	}
}

// Past maxBytes a session's log rotates to <file>.1.
func TestServeAuditLogRotation(t *testing.T) {
	home, cfg := t.TempDir(), t.TempDir()
	c := startServe(t, clientOptions{env: []string{"DSH_HOME=" + home}}, "--profile", auditProfile(t, cfg, 1500), "--workspace", t.TempDir())
	path, _, _ := c.call(t, "bash", map[string]any{"command": `printf '%s' "$DSH_SESSION_JSONL"`, "description": "Name the log"})
	for range 8 {
		c.call(t, "bash", map[string]any{"command": "true", "description": "Do nothing"})
	}
	waitFor(t, 10*time.Second, "the rotation", func() bool {
		_, err := os.Stat(path + ".1")
		return err == nil
	})
	for _, p := range []string{path, path + ".1"} {
		if fi, err := os.Stat(p); err != nil || fi.Size() > 1500 {
			t.Errorf("%s: %v %v", p, fi, err)
		}
	}
}

func readJSONL(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("not JSON: %q", sc.Text())
		}
		out = append(out, r)
	}
	return out
}

func keysOf(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, " ")
}

func filterType(recs []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		if r["type"] == typ {
			out = append(out, r)
		}
	}
	return out
}
