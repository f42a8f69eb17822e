package mcpserve_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/container/profile"
	"github.com/dsh-dev/dsh/mcpserve"
	"github.com/dsh-dev/dsh/profiles"
)

const token = "unit-token-0123456789"

// serveHTTP serves rt over HTTP on a loopback port with o (its token set) until the
// test ends, and returns the endpoint's address.
func serveHTTP(t *testing.T, rt *container.Runtime, o mcpserve.HTTPOptions) string {
	t.Helper()
	o.Tokens = []string{token}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ws := t.TempDir()
	srv := mcpserve.New(rt, "v", log, mcpserve.Options{
		NewSession: func() *container.Session { return &container.Session{ID: "s", Cwd: ws} },
		HTTP:       o,
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		srv.Close()
	})
	return ln.Addr().String()
}

type bearer struct{ next http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	return b.next.RoundTrip(r)
}

var short = mcpserve.HTTPOptions{
	ReadHeaderTimeout: 300 * time.Millisecond,
	ReadTimeout:       300 * time.Millisecond,
	WriteTimeout:      300 * time.Millisecond,
	IdleTimeout:       300 * time.Millisecond,
}

// The read, write and idle timeouts bound what a client sends and how fast it reads,
// never how long an authenticated request lives: a call longer than all of them gets
// its result, and the session's GET stream, open longer than all of them, still
// delivers a notification.
func TestHTTPLongRequestsOutliveTheTimeouts(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rt := compose(t, log)
	addr := serveHTTP(t, rt, short)
	var changed atomic.Int32
	cl := mcp.NewClient(&mcp.Implementation{Name: "unit", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed.Add(1) },
	})
	cs, err := cl.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: "http://" + addr + mcpserve.Endpoint, HTTPClient: &http.Client{Transport: bearer{http.DefaultTransport}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
		"command": "sleep 1.2; echo done", "description": "Outlast the timeouts"}})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "done\n" {
		t.Fatalf("a call longer than the timeouts: %v %v", res, err)
	}
	p, err := profile.NewLoader(profiles.FS).Load("minimal")
	if err != nil {
		t.Fatal(err)
	}
	var rows []container.Row
	for _, r := range p.Rows {
		if r.ID != "tool-bash" {
			rows = append(rows, r)
		}
	}
	if err := rt.Compose(p.Name, rows); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for changed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if changed.Load() == 0 {
		t.Error("no tools/list_changed on the GET stream after it outlived the timeouts")
	}
}

// A client with a valid token that stalls its upload gets 408 after the read timeout,
// and its connection closes; a kept-alive connection without a request closes after
// the idle timeout.
func TestHTTPStalledBodyAndIdleConnection(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	addr := serveHTTP(t, compose(t, log), short)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{", addr, token)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	data, err := io.ReadAll(c)
	if err != nil || !strings.HasPrefix(string(data), "HTTP/1.1 408 ") || !strings.Contains(string(data), "the request body did not arrive within 300ms") {
		t.Errorf("a stalled upload: %q %v", data, err)
	}

	k, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	fmt.Fprintf(k, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2025-11-25\r\nContent-Length: %d\r\n\r\n%s", addr, token, len(body), body)
	r := bufio.NewReader(k)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	start := time.Now()
	k.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.ReadByte(); err != io.EOF || time.Since(start) > 5*time.Second {
		t.Errorf("an idle kept-alive connection: %v after %s, want EOF after the idle timeout", err, time.Since(start))
	}
}
