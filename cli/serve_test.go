package cli

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
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
	lines, err := loadTokens(file, dir, io.Discard)
	if got := tokensOf(lines); err != nil || strings.Join(got, ",") != "a-token,second" {
		t.Errorf("tokens %q, %v", got, err)
	}
	os.WriteFile(file, []byte("\n \n"), 0o600)
	if _, err := loadTokens(file, dir, io.Discard); err == nil || !strings.Contains(err.Error(), "no token in it") {
		t.Errorf("empty file: %v", err)
	}
	var stderr bytes.Buffer
	home := filepath.Join(dir, "home")
	lines, err = loadTokens("", home, &stderr)
	got := tokensOf(lines)
	if err != nil || len(got) != 1 || len(got[0]) != 43 {
		t.Fatalf("generated %q, %v", got, err)
	}
	data, _ := os.ReadFile(filepath.Join(home, "serve-token"))
	fi, _ := os.Stat(filepath.Join(home, "serve-token"))
	if string(data) != got[0]+"\n" || fi.Mode().Perm() != 0o600 || !strings.Contains(stderr.String(), "generated a bearer token in "+filepath.Join(home, "serve-token")) {
		t.Errorf("token file %q mode %v, stderr %q", data, fi.Mode(), stderr.String())
	}
	// The next start reuses it: clients configured with it keep working.
	stderr.Reset()
	againLines, _ := loadTokens("", home, &stderr)
	again := tokensOf(againLines)
	if again[0] != got[0] || !strings.Contains(stderr.String(), "dsh: using the bearer token in "+filepath.Join(home, "serve-token")) {
		t.Errorf("a second start: %q (first %q), stderr %q", again, got, stderr.String())
	}
	// A file that is not a private token dsh could have written is replaced.
	path := filepath.Join(home, "serve-token")
	for name, spoil := range map[string]func(){
		"readable by others": func() { os.Chmod(path, 0o644) },
		"not a token":        func() { os.WriteFile(path, []byte("short\n"), 0o600) },
		"two lines":          func() { os.WriteFile(path, []byte(got[0]+"\n"+got[0]+"\n"), 0o600) },
		"a symlink":          func() { os.Remove(path); os.Symlink(file, path) },
	} {
		spoil()
		freshLines, err := loadTokens("", home, io.Discard)
		fresh := tokensOf(freshLines)
		fi, _ := os.Lstat(path)
		data, _ := os.ReadFile(path)
		if err != nil || fresh[0] == got[0] || string(data) != fresh[0]+"\n" || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %q, %v; file %q mode %v", name, fresh, err, data, fi.Mode())
		}
		got = fresh
	}
}

// Two starts at once: one writes the token, the other reads it; neither replaces it.
func TestHomeTokenRace(t *testing.T) {
	home := t.TempDir()
	const n = 8
	tokens := make(chan string, n)
	for range n {
		go func() {
			got, err := homeToken(home, io.Discard)
			if err != nil {
				t.Error(err)
				tokens <- ""
				return
			}
			tokens <- got[0]
		}()
	}
	first := <-tokens
	for range n - 1 {
		if tok := <-tokens; tok != first {
			t.Errorf("tokens %q and %q", first, tok)
		}
	}
	data, _ := os.ReadFile(filepath.Join(home, "serve-token"))
	if string(data) != first+"\n" {
		t.Errorf("file %q, token %q", data, first)
	}
}

// A kept token is reused only when it has the shape of a generated one.
func TestGeneratedTokenShape(t *testing.T) {
	for token, want := range map[string]bool{
		strings.Repeat("a", 42): false, strings.Repeat("a", 43): true, strings.Repeat("Zz9_-", 51) + "x": true,
		strings.Repeat("a", 257): false, strings.Repeat("a", 42) + "+": false, strings.Repeat("a", 42) + "=": false,
		strings.Repeat("a", 42) + "é": false, "": false,
	} {
		if got := generatedToken(token); got != want {
			t.Errorf("generatedToken(%q) = %v, want %v", token, got, want)
		}
	}
}
