package main_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// retryRecorder passes requests on with the bearer token and keeps the last one that
// answered an input_required result (its body carries inputResponses), headers and all.
type retryRecorder struct {
	mu      sync.Mutex
	body    []byte
	headers http.Header
}

func (rr *retryRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		data, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(data))
		if bytes.Contains(data, []byte(`"inputResponses"`)) {
			rr.mu.Lock()
			rr.body, rr.headers = data, r.Header.Clone()
			rr.mu.Unlock()
		}
	}
	return bearer{token: testToken}.RoundTrip(r)
}

// post sends body to url with headers (the recorded ones) and returns the response text.
func postRaw(t *testing.T, url string, headers http.Header, body []byte) string {
	t.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header = headers.Clone()
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return string(data)
}

// A stateless-lane approval is used once: the accepted retry, POSTed again word for
// word, is refused with -32602 "this approval was already used" and runs nothing; a
// request state signed with the principal's key (derivable from its token) that claims
// to expire in ten years is refused as invalid.
func TestStatelessApprovalCannotBeReplayed(t *testing.T) {
	ws := t.TempDir()
	srv := startHTTPServe(t, "--profile", "sandbox", "--sandbox-mode", "read-only", "--workspace", ws, "--token-file", writeTokens(t, testToken))
	rec := &retryRecorder{}
	accept := func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept"}, nil
	}
	c := connectStateless(t, &mcp.StreamableClientTransport{Endpoint: srv.url, HTTPClient: &http.Client{Transport: rec}},
		statelessOptions{elicit: accept, noListen: true})
	args := map[string]any{"command": "echo ran >> marker", "description": "Append to a marker file",
		"sandbox_permissions": "workspace-write", "justification": "The marker is in the workspace."}
	if text, isErr, _ := c.call(t, "bash", args); text != "(no output)" || isErr {
		t.Fatalf("the approved call: %q isError=%v", text, isErr)
	}
	rec.mu.Lock()
	body, headers := rec.body, rec.headers
	rec.mu.Unlock()
	if body == nil {
		t.Fatal("no retry carrying inputResponses was seen")
	}
	for range 2 {
		if got := postRaw(t, srv.url, headers, body); !strings.Contains(got, `"code":-32602`) || !strings.Contains(got, `"message":"this approval was already used"`) {
			t.Errorf("the replayed retry: %s", got)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "marker")); string(data) != "ran\n" {
		t.Errorf("the marker after the replays: %q", data)
	}

	// States for the same call, signed as dsh signs (the key derives from the token):
	// one claiming five minutes is accepted — the signature is right — and one
	// claiming ten years is refused.
	sid := strings.TrimSpace(c.text(t, "bash", map[string]any{"command": "echo $DSH_SESSION_ID", "description": "Show the session id"}))
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	params := req["params"].(map[string]any)
	canonJSON, _ := json.Marshal(params["arguments"])
	digest := sha256.New()
	fmt.Fprintf(digest, "%s\x00%s\x00", sid, "bash")
	digest.Write(canonJSON)
	keyMAC := hmac.New(sha256.New, []byte(testToken))
	keyMAC.Write([]byte("dsh request state"))
	parts := strings.Split(params["requestState"].(string), ".")
	if len(parts) != 3 {
		t.Fatalf("request state %q: want <expiry>.<body>.<mac>", params["requestState"])
	}
	forge := func(ahead time.Duration) []byte {
		exp := strconv.FormatInt(time.Now().Add(ahead).Unix(), 10)
		m := hmac.New(sha256.New, keyMAC.Sum(nil))
		m.Write(digest.Sum(nil))
		m.Write([]byte(exp))
		m.Write([]byte{0})
		m.Write([]byte(parts[1]))
		params["requestState"] = exp + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
		data, _ := json.Marshal(req)
		return data
	}
	if got := postRaw(t, srv.url, headers, forge(5*time.Minute)); strings.Contains(got, `"error"`) {
		t.Errorf("a five-minute state signed as dsh signs: %s", got)
	}
	if got := postRaw(t, srv.url, headers, forge(10*365*24*time.Hour)); !strings.Contains(got, `"code":-32602`) || !strings.Contains(got, "requestState is invalid or expired") {
		t.Errorf("a ten-year state: %s", got)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "marker")); string(data) != "ran\nran\n" {
		t.Errorf("the marker after the forged states (the five-minute one runs): %q", data)
	}
}
