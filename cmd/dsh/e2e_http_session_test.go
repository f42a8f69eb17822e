package main_test

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// testToken is the bearer token of the HTTP tests' principal (writeTokens).
const testToken = "e2e-token-0123456789abcdef"

// writeTokens writes a --token-file holding tokens (one per line) and returns its path.
func writeTokens(t *testing.T, tokens ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(strings.Join(tokens, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// httpServe is a running `dsh serve --http`.
type httpServe struct {
	url    string // http://127.0.0.1:port/mcp
	cmd    *exec.Cmd
	stderr *syncBuffer
}

// startHTTP runs `dsh serve --http 127.0.0.1:0 --token-file <testToken>` and returns
// its URL.
func startHTTP(t *testing.T, ws string) string {
	t.Helper()
	return startHTTPServe(t, "--workspace", ws, "--token-file", writeTokens(t, testToken)).url
}

// startHTTPServe runs `dsh serve --http 127.0.0.1:0 args...` and waits for its address.
func startHTTPServe(t *testing.T, args ...string) *httpServe {
	t.Helper()
	return startHTTPServeCmd(t, exec.Command(dshBin, append([]string{"serve", "--http", "127.0.0.1:0"}, args...)...))
}

// startHTTPServeCmd starts cmd, a `dsh serve --http`, and waits for its address.
func startHTTPServeCmd(t *testing.T, cmd *exec.Cmd) *httpServe {
	t.Helper()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	s := &httpServe{cmd: cmd, stderr: &syncBuffer{}}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`on (http://\S+)`)
		for sc.Scan() {
			s.stderr.Write([]byte(sc.Text() + "\n"))
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case s.url = <-addr:
		return s
	case <-time.After(30 * time.Second):
		t.Fatalf("dsh serve --http did not report its address; stderr:\n%s", s.stderr.String())
	}
	return nil
}

// bearer is an http.RoundTripper adding Authorization: Bearer <token>.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	next := b.next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(r)
}

// authClient is an HTTP client that authenticates with token.
func authClient(token string) *http.Client {
	return &http.Client{Transport: bearer{token: token}}
}

// post sends one JSON-RPC message (as testToken's principal) and returns the response
// body and the session id.
func post(t *testing.T, url, session, body string) (string, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return string(data), resp.Header.Get("Mcp-Session-Id")
}

// A client that never sends notifications/initialized still owns its session: when it
// deletes the session, its background job is killed.
func TestHTTPSessionEndKillsJobsWithoutInitialized(t *testing.T) {
	ws := t.TempDir()
	url := startHTTP(t, ws)
	_, sid := post(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if sid == "" {
		t.Fatal("no session id")
	}
	body, _ := post(t, url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo $$ > pid; exec sleep 300","description":"Sleep in the background","run_in_background":true}}}`)
	if !strings.Contains(body, "started background job bash-1") {
		t.Fatalf("start: %s", body)
	}
	pid := readPidFile(t, filepath.Join(ws, "pid"))
	req, _ := http.NewRequest("DELETE", url, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor(t, 20*time.Second, "the job's process to be killed", func() bool { return !alive(pid) })
}
