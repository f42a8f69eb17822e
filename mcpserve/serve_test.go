package mcpserve

import (
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestRequestState: a state verifies for the call it was signed for, until it expires,
// and for nothing else; its body comes back as signed, and a changed body does not
// verify.
func TestRequestState(t *testing.T) {
	key := []byte("key")
	digest, err := callDigest("s1", "bash", []byte(`{"command":"touch x","description":"d"}`))
	if err != nil {
		t.Fatal(err)
	}
	// Key order and spacing do not matter.
	reordered, _ := callDigest("s1", "bash", []byte(`{ "description":"d", "command":"touch x" }`))
	now := time.Unix(1_800_000_000, 0)
	body := stateBody{Asked: []stateEntry{{Key: "approval-2", Question: "q2"}}, Given: []stateEntry{{Key: "approval", Question: "q1", Answer: "accept-for-session"}}}
	state := signState(key, digest, now.Add(time.Minute), body)
	got, ok := verifyState(key, digest, state, now)
	if _, again := verifyState(key, reordered, state, now); !ok || !again {
		t.Fatal("a fresh state does not verify")
	}
	if !reflect.DeepEqual(got, body) {
		t.Errorf("body %+v, want %+v", got, body)
	}
	other, _ := callDigest("s2", "bash", []byte(`{"command":"touch x","description":"d"}`))
	changed, _ := callDigest("s1", "bash", []byte(`{"command":"rm -rf x","description":"d"}`))
	parts := strings.Split(state, ".")
	forged := signState(key, digest, now.Add(time.Minute), stateBody{Given: []stateEntry{{Key: "approval-2", Question: "q2", Answer: "accept"}}})
	otherBody := parts[0] + "." + strings.Split(forged, ".")[1] + "." + parts[2]
	verifies := func(key, digest []byte, state string, now time.Time) bool {
		_, ok := verifyState(key, digest, state, now)
		return ok
	}
	for name, ok := range map[string]bool{
		"expired":         verifies(key, digest, state, now.Add(2*time.Minute)),
		"another session": verifies(key, other, state, now),
		"other arguments": verifies(key, changed, state, now),
		"another key":     verifies([]byte("other"), digest, state, now),
		"another body":    verifies(key, digest, otherBody, now),
		"garbage":         verifies(key, digest, "garbage", now),
		"empty":           verifies(key, digest, "", now),
		"no body":         verifies(key, digest, parts[0]+"."+parts[2], now),
		"forged expiry":   verifies(key, digest, "9999999999"+state[strings.IndexByte(state, '.'):], now),
	} {
		if ok {
			t.Errorf("%s: verified", name)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 bytes", 999: "999 bytes", 1000: "1.0 kB", 12_345: "12.3 kB", 3_100_000: "3.1 MB", 1_000_000_000: "1.0 GB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestStatelessRequest(t *testing.T) {
	post := func(body string, header ...string) *http.Request {
		r, _ := http.NewRequest("POST", "http://x/mcp", strings.NewReader(body))
		for i := 0; i < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		return r
	}
	stateless := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	for _, tc := range []struct {
		r    *http.Request
		want bool
	}{
		{post(stateless), true},
		{post(`{}`, "Mcp-Protocol-Version", "2026-07-28"), true},
		{post(stateless, "Mcp-Protocol-Version", "2025-11-25"), false},
		{post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-07-28"}}`), false},
		{post(`[` + stateless + `]`), false},
		{post(`not json`), false},
	} {
		got, err := statelessRequest(tc.r)
		if err != nil || got != tc.want {
			t.Errorf("%v: %v %v, want %v", tc.r.Header, got, err, tc.want)
		}
		// The body is still there for the handler.
		if body, _ := io.ReadAll(tc.r.Body); len(body) == 0 {
			t.Error("the body was consumed")
		}
	}
}
