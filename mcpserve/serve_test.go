package mcpserve

import (
	"log/slog"
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

func TestParseMessage(t *testing.T) {
	stateless := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	for _, tc := range []struct {
		body string
		want message
		err  string
	}{
		{stateless, message{stateless: true, call: true}, ""},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-07-28"}}`, message{call: true}, ""},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, message{}, ""},
		{`{"jsonrpc":"2.0","id":"a","method":"subscriptions/listen"}`, message{}, ""},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, message{}, ""},
		{` [` + stateless + `]`, message{batch: true, call: true}, ""},
		{`[not json`, message{batch: true}, ""},
		{`not json`, message{}, ""},
		{`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, message{}, `"id" must be a string or an integer, got 1.5`},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":1e3,"method":"ping"}]`, message{batch: true, call: true}, `got 1e3`},
		{`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, message{}, `got 9007199254740993`},
		{`{"jsonrpc":"2.0","id":true,"method":"ping"}`, message{}, `got true`},
	} {
		got, err := parseMessage([]byte(tc.body))
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: error %v, want %q", tc.body, err, tc.err)
			continue
		}
		if err == nil && got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.body, got, tc.want)
		}
	}
}

// The SDK's log: warnings and errors unless dsh logs at debug; its routine "undelivered
// message" warning is a debug record.
func TestSDKLogger(t *testing.T) {
	const undelivered = "calling notifications/tools/list_changed: rejected by transport: undelivered message: stream not connected or already closed"
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		var out strings.Builder
		sdk := sdkLogger(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: level})))
		sdk.Info("session connected")
		sdk.Warn(undelivered)
		sdk.With("k", "v").Warn("a real warning")
		got := out.String()
		if !strings.Contains(got, `level=WARN msg="a real warning" k=v`) || strings.Contains(got, "level=WARN msg=\"calling") {
			t.Errorf("at %v:\n%s", level, got)
		}
		if debug := strings.Contains(got, `level=DEBUG msg="`+undelivered); debug != (level == slog.LevelDebug) || strings.Contains(got, "session connected") != (level == slog.LevelDebug) {
			t.Errorf("at %v:\n%s", level, got)
		}
	}
}
