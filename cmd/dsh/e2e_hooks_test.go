package main_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hookScript is the PreToolUse hook of the hooks end-to-end test: it saves what it
// reads and where it runs, then answers by what the command asks for.
const hookScript = `#!/bin/bash
input=$(cat)
printf '%s' "$input" > "$HOOK_DIR/payload.json"
printf '%s' "$CLAUDE_PROJECT_DIR" > "$HOOK_DIR/project-dir"
pwd > "$HOOK_DIR/pwd"
case "$input" in
*forbidden*) echo "  forbidden commands are not run here  " >&2; exit 2;;
*json-deny*) echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"the hook says no"}}';;
*json-ask*) echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"the hook wants a human"}}';;
*json-allow*) echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}';;
*rewrite-me*) echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"command":"echo rewritten","description":"Rewritten by the hook"}}}';;
*bad-rewrite*) echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","updatedInput":{"command":"echo x"}}}';;
esac
exit 0
`

// hooksProfile is a profile with the hook above, two hooks that fail on demand (one
// under onError deny, one under pass) and a PostToolUse hook.
func hooksProfile(t *testing.T, dir string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "hook.sh"), []byte(hookScript), 0o755); err != nil {
		t.Fatal(err)
	}
	profile := `extends: default
plugins:
  - id: hooks
    name: hooks
    config:
      preToolUse:
        - id: policy
          matcher: bash
          command: HOOK_SCRIPT
        - id: strict
          command: 'input=$(cat); case "$input" in *strict-exit*) exit 1;; *strict-slow*) sleep 30;; esac'
          timeoutMs: 500
        - id: lenient
          command: 'input=$(cat); case "$input" in *lenient-exit*) exit 1;; *lenient-slow*) sleep 30;; esac'
          timeoutMs: 500
          onError: pass
      postToolUse:
        - id: post
          matcher: bash
          command: 'grep -q post-me && { echo "  the output was reviewed  " >&2; exit 2; }; exit 0'
`
	path := filepath.Join(dir, "dsh.yaml")
	profile = strings.Replace(profile, "HOOK_SCRIPT", filepath.Join(dir, "hook.sh"), 1)
	if err := os.WriteFile(path, []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Hooks through `dsh serve`: exit 2 denies with the documented text and the hook's stderr
// (nothing runs); the JSON deny, ask (approval, over elicitation) and allow; an
// updatedInput that rewrites the command (validated again); a hook that exits 1 or
// times out, under onError deny and pass; a PostToolUse exit 2's line; the payload and
// the environment a hook gets.
func TestServeHooks(t *testing.T) {
	ws, hooks := t.TempDir(), t.TempDir()
	t.Setenv("HOOK_DIR", hooks)
	profile := hooksProfile(t, hooks)
	var mu sync.Mutex
	answer := "accept"
	asked := 0
	c := startServe(t, clientOptions{elicit: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		defer mu.Unlock()
		asked++
		return &mcp.ElicitResult{Action: answer}, nil
	}}, "--profile", profile, "--workspace", ws)
	bash := func(command string) (string, bool) {
		text, isErr, _ := c.call(t, "bash", map[string]any{"command": command, "description": "Run a hook test"})
		return text, isErr
	}

	text, isErr := bash("touch forbidden-marker")
	if text != `Error: command denied by policy: hook "policy" (forbidden commands are not run here)` || !isErr {
		t.Fatalf("exit 2: %q %v", text, isErr)
	}
	if _, err := os.Stat(filepath.Join(ws, "forbidden-marker")); err == nil {
		t.Fatal("the denied command ran")
	}

	var payload map[string]any
	data, _ := os.ReadFile(filepath.Join(hooks, "payload.json"))
	if err := json.Unmarshal(data, &payload); err != nil {
		t.Fatalf("payload %q: %v", data, err)
	}
	var names []string
	for k := range payload {
		names = append(names, k)
	}
	slices.Sort(names)
	if strings.Join(names, " ") != "cwd hook_event_name session_id tool_input tool_name transcript_path" ||
		payload["cwd"] != ws || payload["hook_event_name"] != "PreToolUse" || payload["tool_name"] != "bash" ||
		payload["transcript_path"] != "" || payload["session_id"] == "" ||
		mustJSON(payload["tool_input"]) != `{"command":"touch forbidden-marker","description":"Run a hook test"}` {
		t.Errorf("payload %s", data)
	}
	if dir, _ := os.ReadFile(filepath.Join(hooks, "project-dir")); string(dir) != ws {
		t.Errorf("CLAUDE_PROJECT_DIR %q, want %q", dir, ws)
	}
	if pwd, _ := os.ReadFile(filepath.Join(hooks, "pwd")); strings.TrimSpace(string(pwd)) != ws {
		t.Errorf("the hook ran in %q, want %q", pwd, ws)
	}

	for _, tc := range []struct {
		command, answer, text string
		isErr                 bool
		asks                  int
	}{
		{"touch json-deny", "", `Error: command denied by policy: hook "policy" (the hook says no)`, true, 0},
		{"echo json-ask", "decline", `Error: the user did not allow this command (hook "policy")`, true, 1},
		{"echo json-ask", "accept", "json-ask\n", false, 1},
		{"echo json-allow", "", "json-allow\n", false, 0},
		{"echo rewrite-me", "", "rewritten\n", false, 0},
		{"echo bad-rewrite", "", `Error: invalid arguments from hook "policy": missing required property "description"`, true, 0},
		{"echo strict-exit", "", `Error: command denied by policy: hook "strict" (hook failed: exit code 1)`, true, 0},
		{"echo strict-slow", "", `Error: command denied by policy: hook "strict" (hook failed: timed out after 500ms)`, true, 0},
		{"echo lenient-exit", "", "lenient-exit\n", false, 0},
		{"echo lenient-slow", "", "lenient-slow\n", false, 0},
		{"echo post-me", "", "post-me\n[hook \"post\": the output was reviewed]", false, 0},
		{"printf post-me", "", "post-me\n[hook \"post\": the output was reviewed]", false, 0},
	} {
		mu.Lock()
		answer, asked = tc.answer, 0
		mu.Unlock()
		text, isErr := bash(tc.command)
		mu.Lock()
		n := asked
		mu.Unlock()
		if text != tc.text || isErr != tc.isErr || n != tc.asks {
			t.Errorf("%s: %q (isError %v, %d questions), want %q (isError %v, %d)", tc.command, text, isErr, n, tc.text, tc.isErr, tc.asks)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(hooks, "payload.json")); !strings.Contains(string(data), `"command":"printf post-me"`) {
		t.Errorf("the last payload %s", data)
	}
}

// claudeSettings is a Claude Code settings file as a project keeps it in
// .claude/settings.json, with permissions (the rules plugin's) and hooks.
const claudeSettings = `{
  "permissions": {"allow": ["Bash(npm test:*)"], "deny": ["Bash(curl:*)"]},
  "hooks": {
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/no-secrets.sh", "timeout": 10}]}
    ],
    "PostToolUse": [
      {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "exit 2"}]},
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "echo '{\"hookSpecificOutput\":{\"hookEventName\":\"PostToolUse\",\"additionalContext\":\"remember to run the tests\"}}'"}]}
    ],
    "SessionStart": [{"hooks": [{"type": "command", "command": "echo hello"}]}]
  }
}`

// A Claude Code settings file's hooks run under dsh: its PreToolUse hook on Bash
// blocks, its PostToolUse hook adds context, the command finds the project through
// CLAUDE_PROJECT_DIR.
func TestServeClaudeSettingsHooks(t *testing.T) {
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".claude", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, ".claude", "settings.json"), []byte(claudeSettings), 0o644)
	os.WriteFile(filepath.Join(ws, ".claude", "hooks", "no-secrets.sh"),
		[]byte("#!/bin/bash\nif jq -e '.tool_input.command | test(\"\\\\.env\")' >/dev/null 2>&1 || grep -q '\\.env'; then echo 'reading .env is blocked' >&2; exit 2; fi\nexit 0\n"), 0o755)
	profile := filepath.Join(ws, "dsh.yaml")
	os.WriteFile(profile, []byte("extends: default\nplugins:\n  - id: hooks\n    name: hooks\n    config:\n      claudeSettings: [.claude/settings.json]\n"), 0o644)
	c := startServe(t, clientOptions{}, "--profile", profile, "--workspace", ws)
	text, isErr, _ := c.call(t, "bash", map[string]any{"command": "cat .env", "description": "Read the env file"})
	if text != `Error: command denied by policy: hook "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/no-secrets.sh" (reading .env is blocked)` || !isErr {
		t.Fatalf("%q %v", text, isErr)
	}
	text, _, _ = c.call(t, "bash", map[string]any{"command": "echo ok", "description": "Say ok"})
	want := "ok\n[hook \"echo '{\\\"hookSpecificOutput\\\":{\\\"hookEventName\\\":\\\"PostToolUse\\\",\\\"additionalContext\\\":\\\"remember to run the tests\\\"}}'\": remember to run the tests]"
	if text != want {
		t.Fatalf("%q\nwant %q", text, want)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The hooks example profile checks, and its hooks judge a `dsh call`.
func TestHooksExampleProfile(t *testing.T) {
	example, err := filepath.Abs(filepath.Join("..", "..", "examples", "hooks", "profile.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	t.Setenv("DSH_HOME", t.TempDir())
	if out, errOut, code := runDsh(t, ws, "check", "--profile", example); code != 0 {
		t.Fatalf("check: %d %s %s", code, out, errOut)
	}
	out, _, code := runDsh(t, ws, "call", "--profile", example, "bash", `{"command":"git push --force origin main","description":"Push"}`)
	if code != 1 || out != `Error: command denied by policy: hook "no-force-push" (force pushes rewrite shared history)` {
		t.Fatalf("%d %q", code, out)
	}
	out, _, code = runDsh(t, ws, "call", "--profile", example, "bash", `{"command":"grep -c '\"type\":\"session\"' \"$DSH_SESSION_JSONL\"","description":"Read the audit log"}`)
	if code != 0 || out != "1\n" {
		t.Fatalf("%d %q", code, out)
	}
}
