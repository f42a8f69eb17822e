package main_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/internal/proctest"
)

// sessionClient connects a session-lane Go SDK client over HTTP as token's principal.
func sessionClient(t *testing.T, endpoint, token string) *mcp.ClientSession {
	t.Helper()
	cl := mcp.NewClient(&mcp.Implementation{Name: "http-faults", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: authClient(token)}, &mcp.ClientSessionOptions{ProtocolVersion: sessionRevision})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// hostOf is the host:port of an http:// URL.
func hostOf(t *testing.T, endpoint string) string {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// stopHTTP ends an HTTP dsh as an operator does, with SIGTERM: it must exit 0 and leave
// nothing it started (its tree is taken before the signal).
func stopHTTP(t *testing.T, srv *httpServe) {
	t.Helper()
	tree := treeOf(srv.cmd.Process.Pid)
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitHTTPExit(t, srv)
	wantGone(t, tree)
}

// waitHTTPExit wants dsh to exit 0 within 30 s of a SIGTERM.
func waitHTTPExit(t *testing.T, srv *httpServe) { waitHTTPExitWithin(t, srv, 30*time.Second) }

// waitHTTPExitWithin wants dsh to exit 0 within d of a SIGTERM.
func waitHTTPExitWithin(t *testing.T, srv *httpServe, d time.Duration) {
	t.Helper()
	wantExitZero(t, srv.cmd, srv.stderr, d)
}

// One client with a valid token that stalls its upload (a body shorter than its
// Content-Length, no session yet) holds up no other client: new sessions and new
// principals of other tokens are served at once, and what they held is released. A
// SIGTERM with the upload still stalled ends dsh, leaving nothing.
func TestHTTPStalledUploadBlocksNoOne(t *testing.T) {
	const other, third = "e2e-other-token-0123456789", "e2e-third-token-0123456789"
	srv := startHTTPServe(t, "--workspace", t.TempDir(), "--token-file", writeTokens(t, testToken, other, third))
	pid := srv.cmd.Process.Pid
	// Warm up: one session and one principal, so what the first of each makes is in the
	// baseline.
	sessionClient(t, srv.url, other).Close()
	httpStateless(t, srv.url, third, statelessOptions{noListen: true}).Close()
	fds, rss := len(heldFDs(pid)), rssKB(t, pid)
	stall, err := net.Dial("tcp", hostOf(t, srv.url))
	if err != nil {
		t.Fatal(err)
	}
	defer stall.Close()
	fmt.Fprintf(stall, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nMcp-Protocol-Version: 2025-11-25\r\n"+
		"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":\"2.0\",",
		hostOf(t, srv.url), testToken)
	for i := range 10 {
		start := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			if i%2 == 0 {
				sessionClient(t, srv.url, other).Close()
			} else {
				c := httpStateless(t, srv.url, third, statelessOptions{noListen: true})
				c.Close()
			}
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("connection %d of another token waited %s behind the stalled upload", i, time.Since(start))
		}
	}
	// The stalled request itself is still waiting for its body, not answered.
	stall.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := stall.Read(make([]byte, 1)); n != 0 || !os.IsTimeout(err) {
		t.Errorf("the stalled upload was answered early: %d %v", n, err)
	}
	// The ten closed sessions and principals hold no descriptor (sockets aside: heldFDs)
	// — a file or pipe kept per connection or per session would be 10 or more; the
	// allowance is the pipe pool (see TestServeWatchdogDeathIsSupervised).
	const pool = 4
	if !proctest.Until(10*time.Second, func() bool { return len(heldFDs(pid)) <= fds+pool }) {
		t.Errorf("dsh holds %d descriptors (sockets aside) after the other clients closed, %d before: %q", len(heldFDs(pid)), fds, heldFDs(pid))
	}
	// 16 MB: far above ten short sessions' garbage; a wait for the stalled body that
	// allocates as it goes (a read loop spinning on the short body) goes past it.
	if grown := rssKB(t, pid) - rss; grown > 16<<10 {
		t.Errorf("RSS grew by %d kB with the upload stalled (%d kB before)", grown, rss)
	}
	// The stalled request does not hold up the shutdown: once the calls have answered,
	// its connection is closed (a second later). 8 s is far below the 15 s the shutdown
	// waited for it before, and far above what a loaded machine needs.
	tree := treeOf(pid)
	stopped := time.Now()
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitHTTPExitWithin(t, srv, 8*time.Second)
	wantGone(t, tree)
	t.Logf("dsh exited %v after SIGTERM, with the upload stalled", time.Since(stopped).Round(time.Millisecond))
}

// Connections without a valid token: a 401 closes its connection at once; connections
// that send nothing are bounded (the oldest beyond the limit closed), so dsh's
// descriptors stay bounded and a client with the token still gets in; the rest are
// closed after the header timeout. Nothing is left open afterwards, nor is memory kept.
func TestHTTPConnectionsWithoutTokenAreBounded(t *testing.T) {
	srv := startHTTPServe(t, "--workspace", t.TempDir(), "--token-file", writeTokens(t, testToken))
	pid := srv.cmd.Process.Pid
	host := hostOf(t, srv.url)
	// Warm up: one authenticated session, so what it opens is in the baseline.
	cs := sessionClient(t, srv.url, testToken)
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "true", "description": "Warm up"}}); err != nil {
		t.Fatal(err)
	}
	base, rss := fdCount(t, pid), rssKB(t, pid)

	// 300 requests with a wrong token, each on its connection, 50 at a time (below the
	// limit: beyond it the oldest would be closed before it is answered): 401, then EOF.
	var wg sync.WaitGroup
	errs := make(chan error, 300)
	slots := make(chan struct{}, 50)
	for range 300 {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			c, err := net.Dial("tcp", host)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer wrong\r\nContent-Length: 2\r\n\r\n{}", host)
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			data, err := io.ReadAll(c)
			if err != nil || !strings.HasPrefix(string(data), "HTTP/1.1 401 ") {
				errs <- fmt.Errorf("after a 401: %q %v", data, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// 1,000 connections that send nothing.
	silent := make([]net.Conn, 0, 1000)
	for range 1000 {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	if n := fdCount(t, pid); n > base+128+16 {
		t.Errorf("dsh holds %d descriptors with 1,000 silent connections (%d before)", n, base)
	}
	// The first of them were closed to make room.
	silent[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := silent[0].Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the oldest silent connection: %v, want EOF", err)
	}
	// A client with the token is served meanwhile, on a new connection.
	text, _, _ := (&statelessClient{ClientSession: sessionClient(t, srv.url, testToken)}).call(t, "bash", map[string]any{"command": "echo in", "description": "Get in past the crowd"})
	if text != "in\n" {
		t.Errorf("the authenticated call: %q", text)
	}
	// The others go after the header timeout (10 s).
	last := silent[len(silent)-1]
	last.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := last.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the newest silent connection after the header timeout: %v, want EOF", err)
	}
	waitFor(t, 20*time.Second, "dsh's descriptors back to their level", func() bool { return fdCount(t, pid) <= base+8 })
	// 16 MB for 1,300 connections: a connection's state kept after it was closed (its
	// goroutine and its read and write buffers, some 16 kB at least) would be 20 MB.
	if grown := rssKB(t, pid) - rss; grown > 16<<10 {
		t.Errorf("RSS grew by %d kB after 1,300 connections without a token (%d kB before)", grown, rss)
	}
	t.Logf("RSS %d kB before the connections, %d kB after", rss, rssKB(t, pid))
	stopHTTP(t, srv)
}

// SIGTERM with 20 calls in flight over HTTP (10 session-lane sessions, 10 calls of a
// stateless principal): every call is answered "Error: tool call aborted" — never an
// empty response — dsh exits 0, and no process it started is left, nor anything in
// its temp dir.
func TestHTTPSigtermAnswersEveryCallInFlight(t *testing.T) {
	ws, tmp := t.TempDir(), t.TempDir()
	t.Setenv("TMPDIR", tmp) // dsh's temp dir: its spill directory is the test's
	srv := startHTTPServe(t, "--workspace", ws, "--token-file", writeTokens(t, testToken))
	pid := srv.cmd.Process.Pid
	stateless := httpStateless(t, srv.url, testToken, statelessOptions{noListen: true})
	type answer struct {
		text string
		err  error
	}
	answers := make(chan answer, 20)
	for i := range 20 {
		cs := stateless.ClientSession
		if i < 10 {
			cs = sessionClient(t, srv.url, testToken)
		}
		go func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
				"command": fmt.Sprintf("echo $$ > pid%d; exec sleep 300", i), "description": "Sleep until dsh stops"}})
			a := answer{err: err}
			if err == nil && len(res.Content) > 0 {
				a.text = res.Content[0].(*mcp.TextContent).Text
			}
			answers <- a
		}()
	}
	var pids []int
	for i := range 20 {
		pids = append(pids, readPidFile(t, filepath.Join(ws, fmt.Sprintf("pid%d", i))))
	}
	tree := treeOf(pid)
	srv.cmd.Process.Signal(syscall.SIGTERM)
	for range 20 {
		select {
		case a := <-answers:
			if a.err != nil || a.text != "Error: tool call aborted" {
				t.Errorf("a call in flight at SIGTERM: %q %v", a.text, a.err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a call in flight at SIGTERM got no answer")
		}
	}
	waitHTTPExit(t, srv)
	wantGone(t, append(pids, tree...))
	if names := entries(t, tmp); len(names) != 0 {
		t.Errorf("left in the temp dir after SIGTERM: %q", names)
	}
}

// Batches were removed in 2025-06-18: a session that agreed on a newer revision gets
// its batch refused whatever headers it sends (a 10,000-call batch runs nothing), and
// the stateless lane refuses them too; a 2025-03-26 session still has them.
func TestHTTPBatchesOnlyWhereTheRevisionHasThem(t *testing.T) {
	ws := t.TempDir()
	srv := startHTTPServe(t, "--workspace", ws, "--token-file", writeTokens(t, testToken))
	open := func(version string) string {
		_, sid := post(t, srv.url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
		if sid == "" {
			t.Fatalf("no session for %s", version)
		}
		post(t, srv.url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		return sid
	}
	batch := func(n int) string {
		calls := make([]string, n)
		for i := range calls {
			calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo run >> %s/ran","description":"Count"}}}`, i+10, ws)
		}
		return "[" + strings.Join(calls, ",") + "]"
	}
	send := func(sid, body string, header ...string) (int, string) {
		req, _ := http.NewRequest("POST", srv.url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		for i := 0; i < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	newer := open("2025-11-25")
	want := "JSON-RPC batching is not supported in 2025-06-18 and later (this session's version: 2025-11-25)\n"
	if code, body := send(newer, batch(10000)); code != http.StatusBadRequest || body != want {
		t.Errorf("a 10,000-call batch on 2025-11-25 without a version header: %d %.300q", code, body)
	}
	if code, _ := send(newer, batch(2), "Mcp-Protocol-Version", "2025-03-26"); code != http.StatusBadRequest {
		t.Errorf("a batch on 2025-11-25 claiming 2025-03-26 in its header: %d", code)
	}
	if code, body := send("", batch(2)); code != http.StatusBadRequest || !strings.Contains(body, "needs an initialized session") {
		t.Errorf("a batch without a session: %d %.300q", code, body)
	}
	if code, body := send("", batch(2), "Mcp-Protocol-Version", "2026-07-28"); code != http.StatusBadRequest || !strings.Contains(body, "2026-07-28") {
		t.Errorf("a batch on the stateless lane: %d %.300q", code, body)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); !os.IsNotExist(err) {
		t.Fatalf("a refused batch ran commands: %v", err)
	}
	older := open("2025-03-26")
	code, body := send(older, batch(3))
	if code != http.StatusOK || strings.Count(body, `"exitCode":0`) != 3 {
		t.Errorf("a batch on 2025-03-26: %d %.600s", code, body)
	}
	data, _ := os.ReadFile(filepath.Join(ws, "ran"))
	if strings.Count(string(data), "run\n") != 3 {
		t.Errorf("the 2025-03-26 batch ran %q", data)
	}
	stopHTTP(t, srv)
}

// An id that is neither a string nor an integer is refused (-32600, id null) rather
// than answered as another id.
func TestHTTPFractionalIDRefused(t *testing.T) {
	srv := startHTTPServe(t, "--workspace", t.TempDir(), "--token-file", writeTokens(t, testToken))
	body, _ := post(t, srv.url, "", `{"jsonrpc":"2.0","id":1.5,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: \"id\" must be a string or an integer, got 1.5"}}`
	if strings.TrimSpace(body) != want {
		t.Errorf("id 1.5: %.300s", body)
	}
	stopHTTP(t, srv)
}
