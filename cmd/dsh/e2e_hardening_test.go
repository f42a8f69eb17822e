package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// TestStdioBadInputKeepsServing: every kind of bad line gets its JSON-RPC error (id
// null), in order; then ping still works, and a background job started before keeps
// running and finishes with all its output.
func TestStdioBadInputKeepsServing(t *testing.T) {
	ws := t.TempDir()
	r := startRaw(t, ws)
	r.initialize(t)
	gate := filepath.Join(ws, "gate")
	r.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo first; while [ ! -e `+gate+` ]; do sleep 0.01; done; echo second","description":"A job that outlives the bad input","run_in_background":true}}}`)
	r.await(t, regexp.MustCompile(`started background job bash-1`))

	parseError := `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the line is not valid JSON"}}`
	for _, tc := range []struct{ line, want string }{
		{"not json", parseError},
		{`{"jsonrpc":"2.0","id":5,"method":"ping"`, parseError}, // truncated
		{"[]", `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: empty batch"}}`},
		{"{}", `"code":-32600`},
		{"null", `"code":-32600`},
		{`{"jsonrpc":"1.0","id":6,"method":"ping"}`, `"code":-32600`},
		{strings.Repeat("x", 17<<20), `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the message exceeds the 16 MiB line limit; it was discarded"}}`},
	} {
		r.send(t, tc.line)
		line := r.next(t)
		if !strings.Contains(line, tc.want) || !strings.Contains(line, `"id":null`) {
			t.Errorf("%.40q: answered %s, want %s", tc.line, line, tc.want)
		}
	}
	r.send(t, `{"jsonrpc":"2.0","id":7,"method":"ping"}`)
	if line := r.next(t); line != `{"jsonrpc":"2.0","id":7,"result":{}}` {
		t.Errorf("ping after the bad input: %s", line)
	}
	r.send(t, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"job_list","arguments":{}}}`)
	if line := r.await(t, regexp.MustCompile(`"id":8`)); !strings.Contains(line, `bash-1 [bash] running`) {
		t.Errorf("job_list after the bad input: %s", line)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r.send(t, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"job_output","arguments":{"job_id":"bash-1","wait":true,"timeout_ms":20000}}}`)
	if line := r.await(t, regexp.MustCompile(`"id":9`)); !strings.Contains(line, `"text":"first\nsecond\n[status: completed, exit code: 0]"`) {
		t.Errorf("the job's output: %s", line)
	}
	r.in.Close()
	r.waitExit(t)
}

// TestStdioCancelSendsNoResponse: after notifications/cancelled the command's tree is
// killed and the cancelled request never gets a response, though dsh answers what
// follows and finishes every handler before it exits.
func TestStdioCancelSendsNoResponse(t *testing.T) {
	ws := t.TempDir()
	r := startRaw(t, ws)
	r.initialize(t)
	r.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"sleep 300 & echo $! > child; echo $$ > pid; wait","description":"Sleep until cancelled"}}}`)
	pid := readPidFile(t, filepath.Join(ws, "pid"))
	child := readPidFile(t, filepath.Join(ws, "child"))
	r.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"user pressed stop"}}`)
	waitFor(t, 10*time.Second, "the command's tree to be killed", func() bool { return !alive(pid) && !alive(child) })
	r.send(t, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	r.await(t, regexp.MustCompile(`"id":3`))
	// End of input: dsh waits for every handler, the cancelled one included, then exits;
	// everything it wrote is read by then.
	r.in.Close()
	r.waitExit(t)
	for range r.lines { // to the end of dsh's output
	}
	for _, l := range r.all.all() {
		if strings.Contains(l, `"id":2`) {
			t.Errorf("a response to the cancelled request: %s", l)
		}
	}
}

// TestServeProgressNotifications: a call with a progress token gets
// notifications/progress at least every 5 s while it runs (progress = elapsed seconds,
// message with the output so far), on both lanes.
func TestServeProgressNotifications(t *testing.T) {
	for _, lane := range []string{"session", "stateless", "stateless-http"} {
		t.Run(lane, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var got []*mcp.ProgressNotificationParams
			record := func(p *mcp.ProgressNotificationParams) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, p)
			}
			cmd := exec.Command(dshBin, "serve", "--workspace", t.TempDir())
			var cs *mcp.ClientSession
			switch lane {
			case "stateless-http":
				srv := startHTTPServe(t, "--workspace", t.TempDir(), "--token-file", writeTokens(t, testToken))
				cs = httpStateless(t, srv.url, testToken, statelessOptions{progress: func(r *mcp.ProgressNotificationClientRequest) { record(r.Params) }}).ClientSession
			case "session":
				cl := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
					ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { record(r.Params) },
				})
				var err error
				if cs, err = cl.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: sessionRevision}); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cs.Close() })
			default:
				cs = connectStateless(t, &mcp.CommandTransport{Command: cmd}, statelessOptions{progress: func(r *mcp.ProgressNotificationClientRequest) { record(r.Params) }}).ClientSession
			}
			params := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
				"command": "head -c 3100000 /dev/zero; echo; echo step 2 of 3; sleep 7", "description": "Print, then take 7 seconds"}}
			params.SetProgressToken("tok-1")
			start := time.Now()
			res, err := cs.CallTool(context.Background(), params)
			if err != nil || res.IsError {
				t.Fatalf("call: %v %v", err, res)
			}
			elapsed := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			if len(got) == 0 || len(got) > int(elapsed/(5*time.Second)) {
				t.Fatalf("%d progress notifications in %s", len(got), elapsed)
			}
			re := regexp.MustCompile(`^running (\d+)s, 3\.1 MB of output: step 2 of 3$`)
			for i, p := range got {
				m := re.FindStringSubmatch(p.Message)
				if p.ProgressToken != "tok-1" || m == nil || m[1] != fmt.Sprint(p.Progress) || p.Progress < 5 || (i > 0 && p.Progress <= got[i-1].Progress) {
					t.Errorf("progress %d: %+v", i, p)
				}
			}
		})
	}
}

// TestHTTPBearerToken: /mcp answers 401 (WWW-Authenticate: Bearer, with
// error="invalid_token" for a wrong token) without a valid token and 200 with one; other paths are 404. Without --token-file a token is generated
// into $DSH_HOME/serve-token (0600) and announced.
func TestHTTPBearerToken(t *testing.T) {
	home := t.TempDir()
	cmd := exec.Command(dshBin, "serve", "--http", "127.0.0.1:0", "--workspace", t.TempDir())
	cmd.Env = append(os.Environ(), "DSH_HOME="+home)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var url string
	var lines []string
	sc := bufio.NewScanner(stderr)
	for url == "" && sc.Scan() {
		lines = append(lines, sc.Text())
		if m := regexp.MustCompile(`on (http://\S+)`).FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
	}
	go io.Copy(io.Discard, stderr)
	tokenPath := filepath.Join(home, "serve-token")
	if !strings.Contains(strings.Join(lines, "\n"), "generated a bearer token in "+tokenPath) || !strings.HasSuffix(url, "/mcp") {
		t.Fatalf("stderr: %q", lines)
	}
	fi, err := os.Stat(tokenPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi, err)
	}
	data, _ := os.ReadFile(tokenPath)
	token := strings.TrimSpace(string(data))
	if !regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`).MatchString(token) {
		t.Fatalf("token %q is not 32 bytes base64url", token)
	}

	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	do := func(method, url, auth string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	// Without a bearer token the challenge is plain; with a wrong one it says so
	// (RFC 6750), so that a client does not go looking for an OAuth server.
	for auth, challenge := range map[string]string{
		"": "Bearer", "Basic " + token: "Bearer", "Bearer ": "Bearer",
		"Bearer wrong": `Bearer error="invalid_token"`, "Bearer " + token + "x": `Bearer error="invalid_token"`,
	} {
		resp := do("POST", url, auth)
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != challenge {
			t.Errorf("auth %q: %d, WWW-Authenticate %q, want %q", auth, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), challenge)
		}
	}
	if resp := do("POST", url, "Bearer "+token); resp.StatusCode != http.StatusOK {
		t.Errorf("with the token: %d", resp.StatusCode)
	}
	base := strings.TrimSuffix(url, "/mcp")
	for _, path := range []string{"/", "/mcp/", "/other"} {
		if resp := do("POST", base+path, "Bearer "+token); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, resp.StatusCode)
		}
	}
}

// TestHTTPNonLoopbackRefused: a non-loopback --http address needs --allow-remote.
func TestHTTPNonLoopbackRefused(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		_, stderr, code := runDsh(t, t.TempDir(), "serve", "--http", addr)
		if want := "dsh: refusing to serve on non-loopback address " + addr + " without --allow-remote\n"; code != 2 || stderr != want {
			t.Errorf("--http %s: exit %d, stderr %q, want 2 and %q", addr, code, stderr, want)
		}
	}
	srv := startHTTPServe(t, "--allow-remote", "--http", "0.0.0.0:0", "--token-file", writeTokens(t, testToken))
	if strings.Contains(srv.url, "127.0.0.1") {
		t.Errorf("with --allow-remote: %s", srv.url)
	}
}

// TestHTTPSessionLimit: --max-sessions counts session-lane sessions and stateless
// principals alike; beyond it a new one gets 503, and a freed slot is reusable.
func TestHTTPSessionLimit(t *testing.T) {
	srv := startHTTPServe(t, "--workspace", t.TempDir(), "--max-sessions", "2", "--token-file", writeTokens(t, testToken, "second-token-0123456789"))
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	open := func(token, body string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if strings.Contains(body, "server/discover") {
			req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", "server/discover")
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data), resp.Header.Get("Mcp-Session-Id")
	}
	discover := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	code, _, first := open(testToken, initialize)
	if code != 200 || first == "" {
		t.Fatalf("first session: %d %q", code, first)
	}
	if code, body, _ := open("second-token-0123456789", discover); code != 200 || !strings.Contains(body, `"supportedVersions"`) {
		t.Fatalf("a stateless principal: %d %s", code, body)
	}
	const full = "session limit reached: 2 sessions are open in this harness (--max-sessions)\n"
	if code, body, _ := open(testToken, initialize); code != http.StatusServiceUnavailable || body != full {
		t.Errorf("third session: %d %q", code, body)
	}
	if code, body, _ := open(testToken, discover); code != http.StatusServiceUnavailable || body != full {
		t.Errorf("third (stateless) principal: %d %q", code, body)
	}
	// The known principal is no new session.
	if code, _, _ := open("second-token-0123456789", discover); code != 200 {
		t.Errorf("the existing principal: %d", code)
	}
	req, _ := http.NewRequest("DELETE", srv.url, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Mcp-Session-Id", first)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v %v", resp, err)
	}
	waitFor(t, 10*time.Second, "the freed slot", func() bool {
		code, _, _ := open(testToken, discover)
		return code == 200
	})
}

// TestJobLimitIsHarnessWide: the jobs row's maxJobsTotal bounds the jobs of all sessions.
func TestJobLimitIsHarnessWide(t *testing.T) {
	profile := filepath.Join(t.TempDir(), "profile.yaml")
	os.WriteFile(profile, []byte("extends: default\nplugins:\n  - id: jobs\n    config:\n      maxJobsTotal: 2\n"), 0o644)
	url := startHTTPServe(t, "--workspace", t.TempDir(), "--profile", profile, "--token-file", writeTokens(t, testToken)).url
	connect := func() *mcp.ClientSession {
		cl := mcp.NewClient(&mcp.Implementation{Name: "http-e2e", Version: "1"}, nil)
		cs, err := cl.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: authClient(testToken)}, &mcp.ClientSessionOptions{ProtocolVersion: sessionRevision})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	sleep := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "sleep 60", "description": "Sleep", "run_in_background": true}}
	a, b := connect(), connect()
	for i, cs := range []*mcp.ClientSession{a, b} {
		res, err := cs.CallTool(context.Background(), sleep)
		if err != nil || res.IsError {
			t.Fatalf("job %d: %v %v", i, err, res)
		}
	}
	res, err := a.CallTool(context.Background(), sleep)
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; text != "Error: background job limit reached: 2 jobs are running in this harness" || !res.IsError {
		t.Errorf("third job: %q isError=%v", text, res.IsError)
	}
}

// TestVersionFromBuildInfo: `dsh --version` and serverInfo.version are the module
// version or VCS revision of the build, never "dev"; a build that carries a revision
// reports it.
func TestVersionFromBuildInfo(t *testing.T) {
	out, _, code := runDsh(t, t.TempDir(), "--version")
	v := strings.TrimPrefix(strings.TrimSpace(out), "dsh version ")
	if code != 0 || v == "" || v == "dev" {
		t.Fatalf("dsh --version: %q (exit %d)", out, code)
	}
	info, err := exec.Command("go", "version", "-m", dshBin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`vcs.revision=([0-9a-f]{12})`).FindSubmatch(info); m != nil {
		if !strings.Contains(v, string(m[1])) {
			t.Errorf("version %q lacks the build's revision %s", v, m[1])
		}
	} else {
		t.Logf("this build carries no VCS revision (GOFLAGS=-buildvcs=false, or a git worktree); version %q", v)
	}
	c := startServe(t, clientOptions{}, "--workspace", t.TempDir())
	if got := c.InitializeResult().ServerInfo.Version; got != v {
		t.Errorf("serverInfo.version = %q, --version = %q", got, v)
	}
}

// TestToolResultsMatchTheirOutputSchemas: every tool with structured results declares
// an outputSchema, and the structured content of real calls validates against it.
func TestToolResultsMatchTheirOutputSchemas(t *testing.T) {
	c := startServe(t, clientOptions{}, "--workspace", t.TempDir())
	res, err := c.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*jsonschema.Resolved{}
	for _, tl := range res.Tools {
		data, _ := json.Marshal(tl.OutputSchema)
		var s jsonschema.Schema
		if err := json.Unmarshal(data, &s); err != nil || tl.OutputSchema == nil {
			t.Fatalf("%s: outputSchema %s: %v", tl.Name, data, err)
		}
		if s.Type != "object" {
			t.Errorf("%s: outputSchema type %q, want object", tl.Name, s.Type)
		}
		if schemas[tl.Name], err = s.Resolve(nil); err != nil {
			t.Fatalf("%s: %v", tl.Name, err)
		}
	}
	check := func(name string, args map[string]any) {
		t.Helper()
		text, _, value := c.call(t, name, args)
		if value == nil {
			t.Fatalf("%s: no structured content (%q)", name, text)
		}
		if err := schemas[name].Validate(value); err != nil {
			t.Errorf("%s %v: structured content %v does not match its outputSchema: %v", name, args, value, err)
		}
	}
	check("bash", map[string]any{"command": "echo out; echo err >&2; exit 4", "description": "Both streams"})
	check("bash", map[string]any{"command": "head -c 200000 /dev/zero", "description": "Truncated output"})
	check("bash", map[string]any{"command": "kill -TERM $$", "description": "A signal"})
	check("bash", map[string]any{"command": "sleep 5", "description": "A timeout", "timeoutMs": 100})
	check("bash", map[string]any{"command": "sleep 30", "description": "A job", "run_in_background": true})
	check("job_list", map[string]any{})
	check("job_output", map[string]any{"job_id": "bash-1"})
	check("job_kill", map[string]any{"job_id": "bash-1"})
	check("job_output", map[string]any{"job_id": "bash-1", "wait": true})
	check("job_list", map[string]any{})
	check("job_kill", map[string]any{"job_id": "bash-1"})
}

// TestServeAtATerminal: on a terminal, `dsh serve` says once what it is (on stderr),
// answers a typed word with a JSON-RPC error, and stops on Ctrl-C without an error log.
// A startup error is printed once.
func TestServeAtATerminal(t *testing.T) {
	ptmx, pts := openPTY(t)
	cmd := exec.Command(dshBin, "serve", "--workspace", t.TempDir())
	cmd.Stdin = pts
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	if _, err := ptmx.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if !lines.Scan() || lines.Text() != `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the line is not valid JSON"}}` {
		t.Fatalf("a typed word: %q", lines.Text())
	}
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Errorf("after Ctrl-C: %v", err)
	}
	out := stderr.String()
	notice := "dsh: serving MCP (JSON-RPC, one message per line) on stdin/stdout for an MCP client to start; press Ctrl-D or Ctrl-C to stop\n"
	if strings.Count(out, notice) != 1 || !strings.HasPrefix(out, notice) || strings.Contains(out, "ERROR") || strings.Contains(out, "server ") {
		t.Errorf("stderr:\n%s", out)
	}

	_, errOut, code := runDsh(t, t.TempDir(), "serve", "--profile", "/nonexistent/profile.yaml")
	if code != 1 || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "dsh: ") || !strings.Contains(errOut, "/nonexistent/profile.yaml") {
		t.Errorf("startup error printed as:\n%s", errOut)
	}
}

// openPTY returns a new pseudo-terminal's master and slave ends.
func openPTY(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ptmx, pts
}
