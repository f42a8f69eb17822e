package cli

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestVersionOf(t *testing.T) {
	setting := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, tc := range []struct {
		version  string
		settings []debug.BuildSetting
		want     string
	}{
		{"v1.2.3", nil, "v1.2.3"},
		{"v0.0.0-20261130141916-5bcbe2eefa96+dirty", setting("vcs.revision", "5bcbe2eefa96037e0e597ce11c3ae01e1dea7ae9"), "v0.0.0-20261130141916-5bcbe2eefa96+dirty"},
		{"(devel)", setting("vcs.revision", "5bcbe2eefa96037e0e597ce11c3ae01e1dea7ae9", "vcs.modified", "false"), "5bcbe2eefa96"},
		{"(devel)", setting("vcs.revision", "5bcbe2eefa96037e0e597ce11c3ae01e1dea7ae9", "vcs.modified", "true"), "5bcbe2eefa96-dirty"},
		{"", setting("vcs.revision", "abc"), "abc"},
		{"(devel)", nil, "(devel)"},
	} {
		bi := &debug.BuildInfo{Main: debug.Module{Version: tc.version}, Settings: tc.settings}
		if got := versionOf(bi); got != tc.want {
			t.Errorf("versionOf(%q, %v) = %q, want %q", tc.version, tc.settings, got, tc.want)
		}
	}
}

// TestRequestState: a state verifies for the call it was signed for, until it expires,
// and for nothing else.
func TestRequestState(t *testing.T) {
	key := []byte("key")
	digest, err := callDigest("s1", "bash", []byte(`{"command":"touch x","description":"d"}`))
	if err != nil {
		t.Fatal(err)
	}
	// Key order and spacing do not matter.
	reordered, _ := callDigest("s1", "bash", []byte(`{ "description":"d", "command":"touch x" }`))
	now := time.Unix(1_800_000_000, 0)
	state := signState(key, digest, now.Add(time.Minute))
	if !verifyState(key, digest, state, now) || !verifyState(key, reordered, state, now) {
		t.Fatal("a fresh state does not verify")
	}
	other, _ := callDigest("s2", "bash", []byte(`{"command":"touch x","description":"d"}`))
	changed, _ := callDigest("s1", "bash", []byte(`{"command":"rm -rf x","description":"d"}`))
	for name, ok := range map[string]bool{
		"expired":         verifyState(key, digest, state, now.Add(2*time.Minute)),
		"another session": verifyState(key, other, state, now),
		"other arguments": verifyState(key, changed, state, now),
		"another key":     verifyState([]byte("other"), digest, state, now),
		"garbage":         verifyState(key, digest, "garbage", now),
		"empty":           verifyState(key, digest, "", now),
		"forged expiry":   verifyState(key, digest, "9999999999"+state[strings.IndexByte(state, '.'):], now),
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

func TestCheckAddr(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:8765", "[::1]:0", "localhost:1", "127.1.2.3:9"} {
		if err := checkAddr(addr, false); err != nil {
			t.Errorf("%s: %v", addr, err)
		}
	}
	for _, addr := range []string{"0.0.0.0:8765", ":8765", "[::]:1", "10.1.2.3:80"} {
		err := checkAddr(addr, false)
		var r refusal
		if !errors.As(err, &r) || err.Error() != "refusing to serve on non-loopback address "+addr+" without --allow-remote" {
			t.Errorf("%s: %v", addr, err)
		}
		if err := checkAddr(addr, true); err != nil {
			t.Errorf("%s with --allow-remote: %v", addr, err)
		}
	}
	if err := checkAddr("nonsense", false); err == nil || !errors.As(err, new(usageError)) {
		t.Errorf("nonsense: %v", err)
	}
}

func TestLoadTokens(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens")
	os.WriteFile(file, []byte("  a-token \n\n\tsecond\n"), 0o600)
	got, err := loadTokens(file, dir, io.Discard)
	if err != nil || strings.Join(got, ",") != "a-token,second" {
		t.Errorf("tokens %q, %v", got, err)
	}
	os.WriteFile(file, []byte("\n \n"), 0o600)
	if _, err := loadTokens(file, dir, io.Discard); err == nil || !strings.Contains(err.Error(), "no token in it") {
		t.Errorf("empty file: %v", err)
	}
	var stderr bytes.Buffer
	home := filepath.Join(dir, "home")
	got, err = loadTokens("", home, &stderr)
	if err != nil || len(got) != 1 || len(got[0]) != 43 {
		t.Fatalf("generated %q, %v", got, err)
	}
	data, _ := os.ReadFile(filepath.Join(home, "serve-token"))
	fi, _ := os.Stat(filepath.Join(home, "serve-token"))
	if string(data) != got[0]+"\n" || fi.Mode().Perm() != 0o600 || !strings.Contains(stderr.String(), "generated a bearer token in "+filepath.Join(home, "serve-token")) {
		t.Errorf("token file %q mode %v, stderr %q", data, fi.Mode(), stderr.String())
	}
	again, _ := loadTokens("", home, io.Discard)
	if again[0] == got[0] {
		t.Error("two starts generated the same token")
	}
}

func TestModernRequest(t *testing.T) {
	post := func(body string, header ...string) *http.Request {
		r, _ := http.NewRequest("POST", "http://x/mcp", strings.NewReader(body))
		for i := 0; i < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		return r
	}
	modern := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	for _, tc := range []struct {
		r    *http.Request
		want bool
	}{
		{post(modern), true},
		{post(`{}`, "Mcp-Protocol-Version", "2026-07-28"), true},
		{post(modern, "Mcp-Protocol-Version", "2025-11-25"), false},
		{post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-07-28"}}`), false},
		{post(`[` + modern + `]`), false},
		{post(`not json`), false},
	} {
		got, err := modernRequest(tc.r)
		if err != nil || got != tc.want {
			t.Errorf("%v: %v %v, want %v", tc.r.Header, got, err, tc.want)
		}
		// The body is still there for the handler.
		if body, _ := io.ReadAll(tc.r.Body); len(body) == 0 {
			t.Error("the body was consumed")
		}
	}
}
