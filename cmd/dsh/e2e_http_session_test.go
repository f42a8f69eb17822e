package main_test

import (
	"bufio"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// startHTTP runs `dsh serve --http 127.0.0.1:0` and returns its URL.
func startHTTP(t *testing.T, ws string) string {
	t.Helper()
	cmd := exec.Command(dshBin, "serve", "--http", "127.0.0.1:0", "--workspace", ws)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`on (http://\S+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case url := <-addr:
		return url
	case <-time.After(30 * time.Second):
		t.Fatal("dsh serve --http did not report its address")
	}
	return ""
}

// post sends one JSON-RPC message and returns the response body and the session id.
func post(t *testing.T, url, session, body string) (string, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
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
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor(t, 20*time.Second, "the job's process to be killed", func() bool { return !alive(pid) })
}
