package hooks_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
)

// Exit 2 denies with the hook's stderr (trimmed) as the reason; nothing runs.
func TestPreExit2Denies(t *testing.T) {
	h := newHarness(t, pre(map[string]any{"id": "no-rm", "matcher": "bash", "command": `grep -q '"rm ' && { echo "  rm is not allowed here  " >&2; exit 2; }; exit 0`}))
	s := h.session(container.Accepted)
	if res := h.call(s, "bash", "rm -rf build"); res.Text != `Error: command denied by policy: hook "no-rm" (rm is not allowed here)` || !res.IsError {
		t.Fatalf("%q", res.Text)
	}
	if res := h.call(s, "bash", "ls"); res.Text != "ran ls" {
		t.Fatalf("%q", res.Text)
	}
	if got := h.commands(); !slices.Equal(got, []string{"ls"}) {
		t.Fatalf("ran %q", got)
	}
}

// The JSON answers: deny, ask (the approval service asks), allow, and the legacy
// approve/block; a hook's name is its command when it has no id.
func TestPreJSONDecisions(t *testing.T) {
	for _, c := range []struct {
		name, output string
		answer       container.Answer
		text         string
		asked        int
	}{
		{"deny", `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"use make"}}`, container.Accepted,
			`Error: command denied by policy: hook "j" (use make)`, 0},
		{"ask accepted", `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"it pushes"}}`, container.Accepted,
			"ran git push", 1},
		{"ask declined", `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"it pushes"}}`, container.Declined,
			`Error: the user did not allow this command (hook "j")`, 1},
		{"allow", `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}`, container.Accepted, "ran git push", 0},
		{"legacy approve", `{"decision":"approve","reason":"fine"}`, container.Accepted, "ran git push", 0},
		{"legacy block", `{"decision":"block","reason":"not today"}`, container.Accepted, `Error: command denied by policy: hook "j" (not today)`, 0},
		{"stop", `{"continue":false,"stopReason":"frozen"}`, container.Accepted, `Error: command denied by policy: hook "j" (frozen)`, 0},
		{"plain text", "looks fine to me", container.Accepted, "ran git push", 0},
		{"nothing", "", container.Accepted, "ran git push", 0},
		{"unreadable JSON", `{"decision": 3}`, container.Accepted, `Error: command denied by policy: hook "j" (hook failed: its output is not hook JSON: json: cannot unmarshal number into Go struct field output.decision of type string)`, 0},
		{"unknown decision", `{"hookSpecificOutput":{"permissionDecision":"maybe"}}`, container.Accepted, `Error: command denied by policy: hook "j" (hook failed: unknown permissionDecision "maybe")`, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			if err := os.WriteFile(out, []byte(c.output), 0o644); err != nil {
				t.Fatal(err)
			}
			h := newHarness(t, pre(map[string]any{"id": "j", "command": "cat " + out}))
			s := h.session(c.answer)
			res := h.call(s, "bash", "git push")
			if res.Text != c.text {
				t.Fatalf("got %q, want %q", res.Text, c.text)
			}
			if q := s.Prompter.(*prompter).questions(); len(q) != c.asked || c.asked > 0 && !strings.Contains(q[0], `hook "j" (it pushes)`) {
				t.Fatalf("asked %q", q)
			}
		})
	}
	h := newHarness(t, pre(map[string]any{"command": "echo unnamed >&2; exit 2"}))
	if res := h.call(h.session(container.Accepted), "bash", "ls"); res.Text != `Error: command denied by policy: hook "echo unnamed >&2; exit 2" (unnamed)` {
		t.Fatalf("%q", res.Text)
	}
}

// An updatedInput replaces the arguments: the rewritten command runs; it is validated
// again, and the hook sees the new arguments when the waterfall asks again.
func TestPreUpdatedInput(t *testing.T) {
	rewrite := `input=$(cat); case "$input" in *'"npm test"'*) echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"command":"npm test --silent","description":"d"}}}';; esac`
	h := newHarness(t, pre(map[string]any{"id": "quiet-npm", "command": rewrite}))
	s := h.session(container.Accepted)
	if res := h.call(s, "bash", "npm test"); res.Text != "ran npm test --silent" {
		t.Fatalf("%q", res.Text)
	}
	if got := h.commands(); !slices.Equal(got, []string{"npm test --silent"}) {
		t.Fatalf("ran %q", got)
	}
	bad := `echo '{"hookSpecificOutput":{"permissionDecision":"allow","updatedInput":{"command":42}}}'`
	h = newHarness(t, pre(map[string]any{"id": "bad", "command": bad}))
	if res := h.call(h.session(container.Accepted), "bash", "ls"); res.Text != `Error: invalid arguments from hook "bad": missing required property "description"` || len(h.commands()) != 0 {
		t.Fatalf("%q ran %q", res.Text, h.commands())
	}
}

// A failed run — an exit other than 0 and 2, a timeout, a spawn failure — is the hook's
// onError: deny (the default, naming the failure) or pass.
func TestPreOnError(t *testing.T) {
	for _, c := range []struct {
		name    string
		hook    map[string]any
		onError string
		text    string
	}{
		{"exit 1", map[string]any{"id": "h", "command": "exit 1"}, "", `Error: command denied by policy: hook "h" (hook failed: exit code 1)`},
		{"exit 1 pass", map[string]any{"id": "h", "command": "exit 1"}, "pass", "ran ls"},
		{"timeout", map[string]any{"id": "h", "command": "sleep 30", "timeoutMs": 200}, "deny", `Error: command denied by policy: hook "h" (hook failed: timed out after 200ms)`},
		{"timeout pass", map[string]any{"id": "h", "command": "sleep 30", "timeoutMs": 200}, "pass", "ran ls"},
		{"killed", map[string]any{"id": "h", "command": "kill -KILL $$"}, "", `Error: command denied by policy: hook "h" (hook failed: killed by signal SIGKILL)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.onError != "" {
				c.hook["onError"] = c.onError
			}
			h := newHarness(t, pre(c.hook))
			if res := h.call(h.session(container.Accepted), "bash", "ls"); res.Text != c.text {
				t.Fatalf("got %q, want %q", res.Text, c.text)
			}
		})
	}
	// A spawn failure: the session's workspace does not exist.
	h := newHarness(t, pre(map[string]any{"id": "h", "command": "true"}))
	s := h.session(container.Accepted)
	s.Cwd = filepath.Join(h.ws, "gone")
	if res := h.call(s, "bash", "ls"); !strings.HasPrefix(res.Text, `Error: command denied by policy: hook "h" (hook failed: `) || !strings.Contains(res.Text, "gone") {
		t.Fatalf("%q", res.Text)
	}
}

// What a hook sees: stdin is exactly the documented payload, it runs in the workspace,
// CLAUDE_PROJECT_DIR names it, the DSH_* snapshot is set, credentials are not.
func TestPrePayloadAndEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SOME_API_TOKEN", "secret")
	save := script(t, dir, "save.sh", `cat > `+filepath.Join(dir, "stdin")+`; pwd > `+filepath.Join(dir, "pwd")+`; env > `+filepath.Join(dir, "env"))
	h := newHarness(t, pre(map[string]any{"command": save, "matcher": "bash|job_.*"}))
	s := h.session(container.Accepted)
	h.call(s, "bash", "ls -l")
	var got map[string]any
	data, _ := os.ReadFile(filepath.Join(dir, "stdin"))
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("stdin %q: %v", data, err)
	}
	want := map[string]any{"session_id": s.ID, "transcript_path": "", "cwd": h.ws, "hook_event_name": "PreToolUse",
		"tool_name": "bash", "tool_input": map[string]any{"command": "ls -l", "description": "d"}}
	if b1, b2 := mustJSON(got), mustJSON(want); b1 != b2 {
		t.Fatalf("payload\n%s\nwant\n%s", b1, b2)
	}
	if pwd, _ := os.ReadFile(filepath.Join(dir, "pwd")); strings.TrimSpace(string(pwd)) != h.ws {
		t.Errorf("cwd %q, want %q", pwd, h.ws)
	}
	env, _ := os.ReadFile(filepath.Join(dir, "env"))
	for _, line := range []string{"CLAUDE_PROJECT_DIR=" + h.ws, "DSH_SESSION_ID=" + s.ID, "DSH_HOME=" + h.home, "DSH_SHELL=1"} {
		if !slices.Contains(strings.Split(string(env), "\n"), line) {
			t.Errorf("environment lacks %s", line)
		}
	}
	if strings.Contains(string(env), "SOME_API_TOKEN") {
		t.Error("a credential reached the hook")
	}
	h.call(s, "job_list", "x") // the matcher is a regexp over the whole name
	data, _ = os.ReadFile(filepath.Join(dir, "stdin"))
	if !strings.Contains(string(data), `"tool_name":"job_list"`) {
		t.Errorf("job_list did not run the hook: %s", data)
	}
}

// A matcher matches the whole tool name; a hook that does not match never runs.
func TestPreMatcher(t *testing.T) {
	h := newHarness(t, pre(map[string]any{"id": "b", "matcher": "bas", "command": "exit 2"}, map[string]any{"id": "j", "matcher": "job_.*", "command": "exit 2"}))
	s := h.session(container.Accepted)
	if res := h.call(s, "bash", "ls"); res.Text != "ran ls" {
		t.Fatalf("%q", res.Text)
	}
	if res := h.call(s, "job_list", "ls"); res.Text != `Error: command denied by policy: hook "j"` {
		t.Fatalf("%q", res.Text)
	}
}

// A hook's allow does not override another gate's ask: the strictest answer wins.
func TestPreAllowDoesNotOverrideAsk(t *testing.T) {
	allow := `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}'`
	ask := `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"second opinion"}}'`
	h := newHarness(t, pre(map[string]any{"id": "yes", "command": allow}, map[string]any{"id": "ask", "command": ask}))
	s := h.session(container.Declined)
	if res := h.call(s, "bash", "ls"); res.Text != `Error: the user did not allow this command (hook "ask")` {
		t.Fatalf("%q", res.Text)
	}
}

// Nothing a hook starts outlives it.
func TestPreLeavesNoProcess(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	h := newHarness(t, pre(map[string]any{"command": "sleep 300 >/dev/null 2>&1 & echo $! > " + pidFile}))
	if res := h.call(h.session(container.Accepted), "bash", "ls"); res.Text != "ran ls" {
		t.Fatalf("%q", res.Text)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid := atoi(t, strings.TrimSpace(string(data)))
	if !until(func() bool { return gone(pid) }) {
		t.Fatalf("the hook's background child %d is still running", pid)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
