package mcpserve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pipeConn connects a stdioConn to the test: the test writes its input and reads its
// output, both through OS pipes (the way `dsh serve` runs).
type pipeConn struct {
	conn  mcp.Connection
	in    *os.File // the test's end of the server's input
	lines *bufio.Scanner
}

func newPipeConn(t *testing.T, maxLine int) *pipeConn {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := (&stdioTransport{in: inR, out: outW, maxLine: maxLine}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		inW.Close()
		inR.Close()
		outW.Close()
		outR.Close()
	})
	sc := bufio.NewScanner(outR)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return &pipeConn{conn: conn, in: inW, lines: sc}
}

func (p *pipeConn) send(t *testing.T, s string) {
	t.Helper()
	if _, err := io.WriteString(p.in, s+"\n"); err != nil {
		t.Fatal(err)
	}
}

func (p *pipeConn) line(t *testing.T) string {
	t.Helper()
	if !p.lines.Scan() {
		t.Fatalf("no output line: %v", p.lines.Err())
	}
	return p.lines.Text()
}

// TestStdioAnswersBadLinesAndReadsOn: each bad line is answered in order, and the next
// good message is still delivered.
func TestStdioAnswersBadLinesAndReadsOn(t *testing.T) {
	p := newPipeConn(t, 1<<20)
	read := make(chan jsonrpc.Message)
	go func() {
		for {
			msg, err := p.conn.Read(context.Background())
			if err != nil {
				close(read)
				return
			}
			read <- msg
		}
	}()
	const (
		parse   = `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the line is not valid JSON"}}`
		invalid = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: `
	)
	for _, tc := range []struct{ line, want string }{
		{"not json", parse},
		{`{"jsonrpc":"2.0","method":`, parse},
		{`{"a":1} {"b":2}`, parse},
		{"[]", invalid + `empty batch"}}`},
		{"{}", invalid + `not a JSON-RPC 2.0 message: want \"jsonrpc\": \"2.0\", got \"\""}}`},
		{"null", invalid + `not a JSON-RPC 2.0 message: want \"jsonrpc\": \"2.0\", got \"\""}}`},
		{`"text"`, invalid + `not a JSON-RPC 2.0 message: expected a JSON object, got a JSON string"}}`},
		{`{"jsonrpc":"2.0","id":1,"method":5}`, invalid + `not a JSON-RPC 2.0 message: \"method\" must be a JSON string, got a JSON number"}}`},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`, invalid},
		{`{"jsonrpc":"2.0","result":{}}`, invalid + `not a JSON-RPC 2.0 message: neither a request (no \"method\") nor a response (no \"id\")"}}`},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"},{}]`, invalid + `batch element 1 is not a JSON-RPC 2.0 message`},
		{strings.Repeat("x", 3<<20), invalid + `the message exceeds the 1 MiB line limit; it was discarded"}}`},
	} {
		p.send(t, tc.line)
		if got := p.line(t); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%.40q: got %s, want %s…", tc.line, got, tc.want)
		}
	}
	p.send(t, "") // blank lines are skipped
	p.send(t, ` {"jsonrpc":"2.0","id":"a","method":"ping"} `+"\r")
	msg := <-read
	if req, ok := msg.(*jsonrpc.Request); !ok || req.Method != "ping" || req.ID.Raw() != "a" {
		t.Fatalf("good message after the bad ones: %#v", msg)
	}
}

// TestStdioDropsTheResponseToACancelledRequest: once the client cancels a request, its
// response is not written; others are.
func TestStdioDropsTheResponseToACancelledRequest(t *testing.T) {
	p := newPipeConn(t, 0)
	ctx := context.Background()
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call"}`)
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	for range 3 {
		if _, err := p.conn.Read(ctx); err != nil {
			t.Fatal(err)
		}
	}
	id1, _ := jsonrpc.MakeID(float64(1))
	id2, _ := jsonrpc.MakeID(float64(2))
	if err := p.conn.Write(ctx, &jsonrpc.Response{ID: id1, Error: &jsonrpc.Error{Code: -32800, Message: "cancelled"}}); err != nil {
		t.Fatal(err)
	}
	if err := p.conn.Write(ctx, &jsonrpc.Response{ID: id2, Result: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if got := p.line(t); got != `{"jsonrpc":"2.0","id":2,"result":{}}` {
		t.Errorf("first line written: %s", got)
	}
}

// TestStdioBatch: a batch's responses are written together, as one array (in a
// session of a revision that has batches).
func TestStdioBatch(t *testing.T) {
	p := newPipeConn(t, 0)
	ctx := context.Background()
	p.send(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}`)
	if _, err := p.conn.Read(ctx); err != nil {
		t.Fatal(err)
	}
	p.send(t, `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`)
	var ids []jsonrpc.ID
	for range 3 {
		msg, err := p.conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if req := msg.(*jsonrpc.Request); req.IsCall() {
			ids = append(ids, req.ID)
		}
	}
	for i := len(ids) - 1; i >= 0; i-- {
		if err := p.conn.Write(ctx, &jsonrpc.Response{ID: ids[i], Result: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.line(t); got != `[{"jsonrpc":"2.0","id":2,"result":{}},{"jsonrpc":"2.0","id":1,"result":{}}]` {
		t.Errorf("batch response: %s", got)
	}
}

// TestStdioCloseUnblocksRead: Close ends a Read that waits for input, for a polled pipe
// and for a reader the runtime cannot poll; a polled descriptor made non-blocking is put
// back in blocking mode.
func TestStdioCloseUnblocksRead(t *testing.T) {
	for _, kind := range []string{"pipe", "reader"} {
		t.Run(kind, func(t *testing.T) {
			var in io.Reader
			var stop func()
			if kind == "pipe" {
				r, w, _ := os.Pipe()
				in, stop = r, func() { w.Close(); r.Close() }
			} else {
				r, w := io.Pipe()
				in, stop = r, func() { w.Close() }
			}
			defer stop()
			conn, err := (&stdioTransport{in: in, out: io.Discard}).Connect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error)
			go func() {
				_, err := conn.Read(context.Background())
				done <- err
			}()
			conn.Close()
			select {
			case err := <-done:
				if !errors.Is(err, io.EOF) {
					t.Errorf("Read after Close: %v, want EOF", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Close did not unblock Read")
			}
		})
	}
}

// FuzzStdioLine: no line makes the transport fail or go silent: every non-blank line is
// either delivered as messages or answered with exactly one JSON-RPC error line (id null).
func FuzzStdioLine(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `[]`, `{}`, `null`, `not json`, `[{"jsonrpc":"2.0","method":"x"}]`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`, `{"jsonrpc":"2.0","id":"x","error":{"code":1,"message":"m"}}`, `{"jsonrpc":"2.0","id":1.5,"method":"a","params":[1]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		line = strings.NewReplacer("\n", " ", "\r", " ").Replace(line)
		if strings.TrimSpace(line) == "" {
			return
		}
		var out strings.Builder
		c := &stdioConn{out: &out, maxLine: 1 << 10, inflight: map[jsonrpc.ID]bool{}, batches: map[jsonrpc.ID]*stdioBatch{}, revision: "2025-03-26"}
		trimmed := []byte(strings.TrimSpace(line))
		if len(trimmed) > c.maxLine {
			return // readLine's limit, tested elsewhere
		}
		msgs := c.decode(trimmed)
		answered := strings.Count(out.String(), "\n")
		switch {
		case len(msgs) > 0 && answered != 0, len(msgs) == 0 && answered != 1:
			t.Fatalf("%q: %d messages and %d answers (%s)", line, len(msgs), answered, out.String())
		case answered == 1:
			var resp struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   struct{ Code int }
			}
			if err := json.Unmarshal([]byte(out.String()), &resp); err != nil || resp.JSONRPC != "2.0" || string(resp.ID) != "null" ||
				(resp.Error.Code != -32700 && resp.Error.Code != -32600) {
				t.Fatalf("%q: answer %s", line, out.String())
			}
		}
		for _, m := range msgs {
			if _, err := jsonrpc.EncodeMessage(m); err != nil {
				t.Fatalf("%q: delivered a message that does not encode: %v", line, err)
			}
		}
	})
}

// The lines Write sends are the SDK's own encoding, byte for byte, whether a response is
// written around its (SDK-encoded, compact) result or encoded whole.
func TestStdioWritesTheSDKEncoding(t *testing.T) {
	result := func(v any) json.RawMessage {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	id := func(v any) jsonrpc.ID {
		id, err := jsonrpc.MakeID(v)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	msgs := []jsonrpc.Message{
		&jsonrpc.Response{ID: id(float64(7)), Result: result(map[string]any{"content": []any{map[string]any{"type": "text", "text": "x<y>&\u2028\n"}}})},
		&jsonrpc.Response{ID: id("a<b>&\"c\""), Result: result(map[string]any{})},
		&jsonrpc.Response{ID: id(float64(-3)), Result: result([]any{nil, 1.5, "\u0000"})},
		&jsonrpc.Response{ID: id(float64(8)), Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad"}},
		&jsonrpc.Response{ID: id(nil), Result: result(1)},
		&jsonrpc.Request{Method: "notifications/progress", Params: result(map[string]any{"progress": 1})},
	}
	for i, msg := range msgs {
		want, err := jsonrpc.EncodeMessage(msg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeMessage(msg)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("message %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// A batch is refused before initialize and in a session of 2025-06-18 or later (MCP
// removed batches then); a duplicate id of a call in flight and an id that is not a
// string or an integer are refused; all with -32600, id null, nothing delivered.
func TestStdioRefusals(t *testing.T) {
	p := newPipeConn(t, 0)
	ctx := context.Background()
	msgs := make(chan jsonrpc.Message, 10)
	go func() {
		for {
			msg, err := p.conn.Read(ctx)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- msg
		}
	}()
	read := func() jsonrpc.Message {
		t.Helper()
		select {
		case msg := <-msgs:
			return msg
		case <-time.After(10 * time.Second):
			t.Fatal("no message")
		}
		return nil
	}
	ping := `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`
	p.send(t, ping)
	if got := p.line(t); got != `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: JSON-RPC batching needs an initialized session of revision 2025-03-26 or older"}}` {
		t.Errorf("a batch before initialize: %s", got)
	}
	p.send(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
	read()
	p.send(t, ping)
	if got := p.line(t); got != `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: JSON-RPC batching is not supported in 2025-06-18 and later (this session's version: 2025-11-25)"}}` {
		t.Errorf("a batch on 2025-11-25: %s", got)
	}
	p.send(t, `{"jsonrpc":"2.0","id":0,"method":"ping"}`)
	if got := p.line(t); got != `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: id 0 is in use by a request in flight"}}` {
		t.Errorf("a duplicate id: %s", got)
	}
	p.send(t, `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`)
	if got := p.line(t); got != `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: not a JSON-RPC 2.0 message: \"id\" must be a string or an integer, got 1.5"}}` {
		t.Errorf("id 1.5: %s", got)
	}
	// Once answered, the id is free again.
	if err := p.conn.Write(ctx, &jsonrpc.Response{ID: mustID(t, float64(0)), Result: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	p.line(t)
	p.send(t, `{"jsonrpc":"2.0","id":0,"method":"ping"}`)
	if msg := read(); msg.(*jsonrpc.Request).Method != "ping" {
		t.Errorf("id 0 after its answer: %v", msg)
	}
}

func mustID(t *testing.T, v any) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A client that writes without reading: reading stops at maxUnanswered calls in flight
// and goes on as answers go out.
func TestStdioStopsReadingWhileAnswersPileUp(t *testing.T) {
	p := newPipeConn(t, 0)
	ctx := context.Background()
	go func() {
		var b strings.Builder
		for i := range maxUnanswered + 10 {
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`+"\n", i+1)
		}
		io.WriteString(p.in, b.String())
	}()
	var ids []jsonrpc.ID
	for range maxUnanswered {
		msg, err := p.conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, msg.(*jsonrpc.Request).ID)
	}
	next := make(chan jsonrpc.Message, 1)
	go func() {
		msg, _ := p.conn.Read(ctx)
		next <- msg
	}()
	select {
	case msg := <-next:
		t.Fatalf("read %v with %d calls unanswered", msg, maxUnanswered)
	case <-time.After(200 * time.Millisecond):
	}
	go func() {
		for p.lines.Scan() {
		}
	}()
	if err := p.conn.Write(ctx, &jsonrpc.Response{ID: ids[0], Result: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	select {
	case msg := <-next:
		if msg == nil {
			t.Fatal("no message after an answer")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading did not resume after an answer")
	}
}
