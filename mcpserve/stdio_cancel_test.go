package mcpserve

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A cancellation that reaches a tools/call too late — its result, a success, was
// settled first (an aborted call reports "tool call aborted", an error) — does not hide
// the answer: a background start's id is the client's to know. A cancelled call that
// failed or was aborted, and any other cancelled request, still gets no response.
func TestStdioAnswersACallTheCancellationReachedTooLate(t *testing.T) {
	p := newPipeConn(t, 0)
	ctx := context.Background()
	requests := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":4,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call"}`,
	}
	for _, r := range requests {
		p.send(t, r)
	}
	for id := 1; id <= 5; id++ {
		p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, id))
	}
	for range 10 {
		if _, err := p.conn.Read(ctx); err != nil {
			t.Fatal(err)
		}
	}
	id := func(n int) jsonrpc.ID { i, _ := jsonrpc.MakeID(float64(n)); return i }
	for _, resp := range []*jsonrpc.Response{
		{ID: id(1), Result: json.RawMessage(`{"content":[{"type":"text","text":"Error: tool call aborted"}],"isError":true}`)},
		{ID: id(2), Error: &jsonrpc.Error{Code: -32603, Message: "internal"}},
		{ID: id(4), Result: json.RawMessage(`{}`)},
		{ID: id(3), Result: json.RawMessage(`{"content":[{"type":"text","text":"started background job bash-3"}],"structuredContent":{"kind":"background","jobId":"bash-3"}}`)},
		{ID: id(5), Result: json.RawMessage(`{"content":[],"isError":false}`)},
	} {
		if err := p.conn.Write(ctx, resp); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{
		`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"started background job bash-3"}],"structuredContent":{"kind":"background","jobId":"bash-3"}}}`,
		`{"jsonrpc":"2.0","id":5,"result":{"content":[],"isError":false}}`,
	} {
		if got := p.line(t); got != want {
			t.Errorf("line written: %s\nwant %s", got, want)
		}
	}
	c := p.conn.(*stdioConn)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.inflight) != 0 || len(c.tools) != 0 {
		t.Errorf("requests still tracked: %v %v", c.inflight, c.tools)
	}
}
