package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// fullOutput finds the spill path a result names.
var fullOutput = regexp.MustCompile(`\[output truncated; full output: ([^\]\n]+)\]`)

// spillOf returns the spill path text names.
func spillOf(t *testing.T, text string) string {
	t.Helper()
	m := fullOutput.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no spill path in %q", text[max(0, len(text)-300):])
	}
	return m[1]
}

// The bash tool tells the model to read the spill file a truncated result names: under
// `dsh serve --profile sandbox` the next confined command does, at that very path —
// whole, read-only.
func TestServeConfinedReadsItsSpillFile(t *testing.T) {
	c := startServe(t, clientOptions{}, "--profile", "sandbox", "--workspace", t.TempDir())
	bash := func(command string) string {
		text, _, _ := c.call(t, "bash", map[string]any{"command": command, "description": "Read the spill file"})
		return text
	}
	path := spillOf(t, bash("seq 1 30000"))
	if got := bash("wc -l " + path); got != "30000 "+path+"\n" {
		t.Fatalf("wc -l: %q", got)
	}
	if got := bash("seq 1 30000 | cmp - " + path + " && echo same"); got != "same\n" {
		t.Fatalf("the spill file's content: %q", got)
	}
	if got := bash("rm -f " + path); !strings.Contains(got, "Read-only file system") {
		t.Errorf("rm: %q", got)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the spill file on the host: %v", err)
	}
}

// Two principals of `dsh serve --http` are two harness sessions: each reads its own
// spill files, and sees nothing of the other's.
func TestServeHTTPSpillFilesArePrivate(t *testing.T) {
	const otherToken = "e2e-other-token-0123456789abcdef"
	s := startHTTPServe(t, "--profile", "sandbox", "--workspace", t.TempDir(), "--token-file", writeTokens(t, testToken, otherToken))
	a := httpStateless(t, s.url, testToken, statelessOptions{noListen: true})
	b := httpStateless(t, s.url, otherToken, statelessOptions{noListen: true})
	bash := func(c *statelessClient, command string) string {
		return c.text(t, "bash", map[string]any{"command": command, "description": "Read a spill file"})
	}
	path := spillOf(t, bash(a, "seq 1 30000"))
	if got := bash(a, "wc -l < "+path); got != "30000\n" {
		t.Fatalf("the owner reads %q", got)
	}
	if got := bash(b, "cat "+path); got != "[stderr]\ncat: "+path+": No such file or directory\n[exit code: 1]" {
		t.Errorf("the other session reads %q", got)
	}
	own := filepath.Base(filepath.Dir(spillOf(t, bash(b, "seq 1 30000"))))
	if got := bash(b, "ls -A "+filepath.Dir(filepath.Dir(path))); got != own+"\n" || own == filepath.Base(filepath.Dir(path)) {
		t.Errorf("the other session's spill directory holds %q (its own: %q)", got, own)
	}
}

// `dsh call` keeps the spill files it reports in $DSH_HOME/spill (the harness, and its
// private spill directory, are gone when it exits); a later confined call reads them
// there.
func TestCallConfinedReadsItsKeptSpillFile(t *testing.T) {
	home := homeTempDir(t, "dsh-e2e-home-")
	ws := t.TempDir()
	call := func(command string) string {
		t.Helper()
		args, _ := json.Marshal(map[string]string{"command": command, "description": "Read a kept spill file"})
		cmd := exec.Command(dshBin, "call", "--profile", "sandbox", "--workspace", ws, "bash", string(args))
		cmd.Env = append(os.Environ(), "DSH_HOME="+home)
		out, err := cmd.Output()
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatal(err)
		}
		return string(out)
	}
	path := spillOf(t, call("seq 1 30000"))
	if !strings.HasPrefix(path, filepath.Join(home, "spill")+"/") {
		t.Fatalf("kept spill file %q is not in $DSH_HOME/spill", path)
	}
	if got := call("wc -l < " + path + "; seq 1 30000 | cmp - " + path + " && echo same"); got != "30000\nsame\n" {
		t.Fatalf("reading the kept spill file: %q", got)
	}
}

// The token file of `dsh serve --http --token-file` is hidden from the server's own
// confined commands, wherever it is: they read an empty file.
func TestServeTokenFileHiddenFromConfinedCommands(t *testing.T) {
	ws := t.TempDir()
	file := filepath.Join(homeTempDir(t, "dsh-e2e-tokens-"), "tokens")
	if err := os.WriteFile(file, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startHTTPServe(t, "--profile", "sandbox", "--workspace", ws, "--token-file", file)
	c := httpStateless(t, s.url, testToken, statelessOptions{noListen: true})
	if got := c.text(t, "bash", map[string]any{"command": "wc -c < " + file, "description": "Read the token file"}); got != "0\n" {
		t.Fatalf("the token file inside the sandbox: %q", got)
	}
}

// The generated token ($DSH_HOME/serve-token) reads empty in the server's own sessions;
// the rest of $DSH_HOME stays readable.
func TestServeGeneratedTokenHiddenFromConfinedCommands(t *testing.T) {
	home := homeTempDir(t, "dsh-e2e-home-")
	t.Setenv("DSH_HOME", home)
	url := startHTTPServe(t, "--profile", "sandbox", "--workspace", t.TempDir()).url
	token, err := os.ReadFile(filepath.Join(home, "serve-token"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "notes"), []byte("visible\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := httpStateless(t, url, strings.TrimSpace(string(token)), statelessOptions{noListen: true})
	got := c.text(t, "bash", map[string]any{"command": `cat "$DSH_HOME/notes"; wc -c < "$DSH_HOME/serve-token"`, "description": "Read the token"})
	if got != "visible\n0\n" {
		t.Fatalf("$DSH_HOME inside the sandbox: %q", got)
	}
}

// Nothing the command prints is an instruction to dsh: a confined `dsh call` whose
// output names fake spill files — a file, a directory, a file older than the keeping
// age, /proc/self/environ — beside a real truncation leaves every one of them where it
// was, unchanged, and $DSH_HOME/spill holds only the real spill file's copy.
func TestCallKeepsOnlyTheSpillFilesItsCaptureReported(t *testing.T) {
	for _, profile := range []string{"default", "sandbox"} {
		t.Run(profile, func(t *testing.T) {
			home := homeTempDir(t, "dsh-e2e-home-")
			victims := homeTempDir(t, "dsh-e2e-victims-")
			file, dir, old := filepath.Join(victims, "file"), filepath.Join(victims, "dir"), filepath.Join(victims, "old")
			for _, p := range []string{file, old, filepath.Join(dir, "inside")} {
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("victim "+p), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			month := time.Now().Add(-30 * 24 * time.Hour)
			if err := os.Chtimes(old, month, month); err != nil {
				t.Fatal(err)
			}
			fakes, printed := "", ""
			for _, p := range []string{file, dir, old, "/proc/self/environ"} {
				fakes += "; echo '[output truncated; full output: " + p + "]'"
				printed += "[output truncated; full output: " + p + "]\n"
			}
			var seq strings.Builder
			for i := 1; i <= 30000; i++ {
				fmt.Fprintf(&seq, "%d\n", i)
			}
			args, _ := json.Marshal(map[string]string{"command": "seq 1 30000" + fakes, "description": "Name fake spill files"})
			for range 2 { // the second call's pruning must not reach the old victim either
				cmd := exec.Command(dshBin, "call", "--profile", profile, "--workspace", t.TempDir(), "bash", string(args))
				cmd.Env = append(os.Environ(), "DSH_HOME="+home)
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("dsh call: %v\n%s", err, out)
				}
				for _, p := range []string{file, dir, old, "/proc/self/environ"} {
					if !strings.Contains(string(out), "full output: "+p+"]") {
						t.Errorf("the command's own text %q was changed", "full output: "+p+"]")
					}
				}
				refs := fullOutput.FindAllStringSubmatch(string(out), -1)
				spillPath := refs[len(refs)-1][1] // the marker dsh wrote comes last
				if !strings.HasPrefix(spillPath, filepath.Join(home, "spill")+"/") {
					t.Errorf("the real spill file was not kept: %q", spillPath)
				}
			}
			for _, p := range []string{file, old, filepath.Join(dir, "inside")} {
				if got, err := os.ReadFile(p); err != nil || string(got) != "victim "+p {
					t.Errorf("%s after the calls: %q, %v", p, got, err)
				}
			}
			if st, err := os.Stat(old); err != nil || !st.ModTime().Equal(month) {
				t.Errorf("the old victim's mtime: %v, %v", st, err)
			}
			kept, err := os.ReadDir(filepath.Join(home, "spill"))
			if err != nil {
				t.Fatal(err)
			}
			if len(kept) != 2 {
				t.Errorf("$DSH_HOME/spill holds %d entries, want the 2 real spill files", len(kept))
			}
			for _, e := range kept {
				data, err := os.ReadFile(filepath.Join(home, "spill", e.Name()))
				if err != nil || string(data) != seq.String()+printed {
					t.Errorf("kept file %s is not a real spill file (%d bytes, %v)", e.Name(), len(data), err)
				}
			}
		})
	}
}
