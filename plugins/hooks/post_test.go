package hooks_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
)

func post(hooksList ...map[string]any) map[string]any {
	l := make([]any, len(hooksList))
	for i, h := range hooksList {
		l[i] = h
	}
	return map[string]any{"postToolUse": l}
}

// A PostToolUse hook's exit 2, block and additionalContext each append a line to the
// result, after a newline when the text lacks one; a failure under onError deny says
// so, under pass nothing does.
func TestPostAppendsLines(t *testing.T) {
	for _, c := range []struct {
		name string
		hook map[string]any
		text string
	}{
		{"exit 2", map[string]any{"id": "fmt", "command": "echo '  reformatted 2 files ' >&2; exit 2"}, "ran ls\n[hook \"fmt\": reformatted 2 files]"},
		{"block", map[string]any{"id": "fmt", "command": `echo '{"decision":"block","reason":"tests fail"}'`}, "ran ls\n[hook \"fmt\": tests fail]"},
		{"context", map[string]any{"id": "fmt", "command": `echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"lint is clean"}}'`}, "ran ls\n[hook \"fmt\": lint is clean]"},
		{"exit 0", map[string]any{"id": "fmt", "command": "echo all good"}, "ran ls"},
		{"exit 1", map[string]any{"id": "fmt", "command": "exit 1"}, "ran ls\n[hook \"fmt\": hook failed: exit code 1]"},
		{"exit 1 pass", map[string]any{"id": "fmt", "command": "exit 1", "onError": "pass"}, "ran ls"},
		{"unnamed", map[string]any{"command": "echo x >&2; exit 2"}, "ran ls\n[hook \"echo x >&2; exit 2\": x]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, post(c.hook))
			if res := h.call(h.session(container.Accepted), "bash", "ls"); res.Text != c.text {
				t.Fatalf("got %q, want %q", res.Text, c.text)
			}
		})
	}
	// Two hooks append in order; a text ending in a newline gets none added.
	h := newHarness(t, post(map[string]any{"id": "a", "command": "echo one >&2; exit 2"}, map[string]any{"id": "b", "command": "echo two >&2; exit 2"}))
	if res := h.call(h.session(container.Accepted), "bash", "ls\n"); res.Text != "ran ls\n[hook \"a\": one]\n[hook \"b\": two]" {
		t.Fatalf("%q", res.Text)
	}
}

// A PostToolUse hook reads the payload with tool_response; it does not run for a call
// that did not run.
func TestPostPayload(t *testing.T) {
	dir := t.TempDir()
	saved := filepath.Join(dir, "stdin")
	config := post(map[string]any{"command": "cat > " + saved})
	config["preToolUse"] = []any{map[string]any{"id": "deny-rm", "command": `grep -q '"rm' && exit 2; exit 0`}}
	h := newHarness(t, config)
	s := h.session(container.Accepted)
	h.call(s, "bash", "echo hi")
	var got map[string]any
	data, _ := os.ReadFile(saved)
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("%q: %v", data, err)
	}
	want := map[string]any{"session_id": s.ID, "transcript_path": "", "cwd": h.ws, "hook_event_name": "PostToolUse", "tool_name": "bash",
		"tool_input":    map[string]any{"command": "echo hi", "description": "d"},
		"tool_response": map[string]any{"text": "ran echo hi", "isError": false, "structuredContent": map[string]any{"exitCode": float64(0)}}}
	if mustJSON(got) != mustJSON(want) {
		t.Fatalf("payload\n%s\nwant\n%s", mustJSON(got), mustJSON(want))
	}
	os.Remove(saved)
	if res := h.call(s, "bash", "rm x"); !strings.HasPrefix(res.Text, "Error: command denied by policy") {
		t.Fatal(res.Text)
	}
	if _, err := os.Stat(saved); err == nil {
		t.Fatal("a PostToolUse hook ran for a denied call")
	}
}
