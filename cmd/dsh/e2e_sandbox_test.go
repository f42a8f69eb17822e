package main_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServeEscalationUsesElicitation drives a sandbox escalation through a real MCP
// client that answers the elicitation: accept runs the call once in the wider mode,
// decline and cancel run nothing.
func TestServeEscalationUsesElicitation(t *testing.T) {
	ws := t.TempDir()
	var mu sync.Mutex
	answer := "accept"
	var asked []*mcp.ElicitParams
	c := startServe(t, clientOptions{elicit: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, req.Params)
		return &mcp.ElicitResult{Action: answer}, nil
	}}, "--profile", "sandbox", "--sandbox-mode", "read-only", "--workspace", ws)

	res, err := c.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if tl.Name == "bash" {
			b, _ := json.Marshal(tl.InputSchema)
			if !strings.Contains(string(b), `"sandbox_permissions"`) || !strings.Contains(string(b), `"justification"`) {
				t.Errorf("bash schema under bash-sandbox lacks the escalation fields: %s", b)
			}
		}
	}

	marker := filepath.Join(ws, "marker")
	touch := map[string]any{"command": "touch marker", "description": "Create a marker file"}
	text, isErr, _ := c.call(t, "bash", touch)
	if isErr || !strings.Contains(text, "[sandbox: file access denied under read-only mode]\n[sandbox: escalation available") || !strings.HasSuffix(text, "\n[exit code: 1]") {
		t.Fatalf("denied touch: %q isError=%v", text, isErr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the denied command created the marker")
	}

	escalate := map[string]any{"command": "touch marker", "description": "Create a marker file",
		"sandbox_permissions": "workspace-write", "justification": "The marker must be created in the workspace."}
	for _, tc := range []struct{ action, want string }{
		{"decline", `Error: the user rejected escalating this command to "workspace-write"`},
		{"cancel", `Error: approval for escalating to "workspace-write" was cancelled`},
	} {
		mu.Lock()
		answer = tc.action
		mu.Unlock()
		if text, isErr, _ := c.call(t, "bash", escalate); text != tc.want || !isErr {
			t.Errorf("%s: %q isError=%v, want %q", tc.action, text, isErr, tc.want)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s: the command ran", tc.action)
		}
	}

	mu.Lock()
	answer = "accept"
	mu.Unlock()
	if text, isErr, _ := c.call(t, "bash", escalate); text != "(no output)" || isErr {
		t.Fatalf("accepted escalation: %q isError=%v", text, isErr)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the approved command did not run: %v", err)
	}
	// allowed-once: the next call is back in read-only.
	if text, _, _ := c.call(t, "bash", map[string]any{"command": "touch second", "description": "Create another file"}); !strings.Contains(text, "denied under read-only mode") {
		t.Errorf("the approval outlived its call: %q", text)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 3 {
		t.Fatalf("elicitations = %d, want 3", len(asked))
	}
	p := asked[0]
	schema, _ := json.Marshal(p.RequestedSchema)
	if p.Mode != "form" && p.Mode != "" || string(schema) != `{"properties":{},"type":"object"}` {
		t.Errorf("elicitation mode %q schema %s", p.Mode, schema)
	}
	for _, part := range []string{"touch marker", "workspace-write", "The marker must be created in the workspace."} {
		if !strings.Contains(p.Message, part) {
			t.Errorf("elicitation message lacks %q:\n%s", part, p.Message)
		}
	}
}

func TestStatusJSONHasExactlyTheDesignShape(t *testing.T) {
	out, _, code := runDsh(t, t.TempDir(), "status", "--json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var st map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if len(st) != 4 || string(st["lastReload"]) != "null" {
		t.Errorf("top-level keys (profile, rows, lastReloadError, lastReload: null before a reload): %s", out)
	}
	var rows []map[string]any
	json.Unmarshal(st["rows"], &rows)
	for _, r := range rows {
		if len(r) != 9 {
			t.Errorf("row keys: %v", r)
		}
		for _, k := range []string{"id", "plugin", "state", "missing", "error", "providers", "candidates", "detail", "since"} {
			if _, ok := r[k]; !ok {
				t.Errorf("row lacks %q: %v", k, r)
			}
		}
	}
}
