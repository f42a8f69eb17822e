package main_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestServeHTTPSessionsAreSeparateHarnessSessions(t *testing.T) {
	url := startHTTP(t, t.TempDir())

	connect := func() *mcp.ClientSession {
		cl := mcp.NewClient(&mcp.Implementation{Name: "http-e2e", Version: "1"}, nil)
		cs, err := cl.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: authClient(testToken)}, &mcp.ClientSessionOptions{ProtocolVersion: sessionRevision})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	call := func(cs *mcp.ClientSession, name string, args map[string]any) string {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	a, b := connect(), connect()
	if got := call(a, "bash", map[string]any{"command": "echo $DSH_SESSION_ID", "description": "Show the session id"}); got == call(b, "bash", map[string]any{"command": "echo $DSH_SESSION_ID", "description": "Show the session id"}) {
		t.Errorf("two sessions share DSH_SESSION_ID %q", got)
	}
	if got := call(a, "bash", map[string]any{"command": "sleep 60", "description": "Sleep in the background", "run_in_background": true}); got != "started background job bash-1" {
		t.Fatalf("start: %q", got)
	}
	if got := call(b, "job_list", map[string]any{}); got != "(no background jobs)" {
		t.Errorf("other session's job_list = %q", got)
	}
	if got := call(b, "job_kill", map[string]any{"job_id": "bash-1"}); got != "Error: job bash-1 belongs to another session" {
		t.Errorf("other session's job_kill = %q", got)
	}
	if got := call(a, "job_list", map[string]any{}); !strings.HasPrefix(got, "bash-1 [bash] running") {
		t.Errorf("owner's job_list = %q", got)
	}
	if got := call(a, "job_kill", map[string]any{"job_id": "bash-1"}); got != "requested cancellation of job bash-1" {
		t.Errorf("owner's job_kill = %q", got)
	}
}
