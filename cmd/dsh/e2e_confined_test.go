package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The attacks of the sandbox issue, against the built binary: `dsh serve --profile
// FILE` in workspace-write, with the profile in the host's temp dir, then inside the
// workspace extending a base there. A confined call cannot rewrite either (the temp dir
// is not even visible), cannot read dsh's own environment, and the composition keeps
// confining.
func TestServeConfinedCannotRewriteItsProfile(t *testing.T) {
	for _, where := range []string{"temp dir", "workspace"} {
		t.Run(where, func(t *testing.T) {
			ws := canonDir(t, t.TempDir())
			files := map[string]string{}
			var profile string
			if where == "temp dir" {
				profile = filepath.Join(canonDir(t, t.TempDir()), "profile.yaml")
				files[profile] = "extends: sandbox\n"
			} else {
				profile = filepath.Join(ws, "conf", "profile.yaml")
				files[profile] = "extends: ./base.yaml\n"
				files[filepath.Join(ws, "conf", "base.yaml")] = "extends: sandbox\n"
			}
			for path, text := range files {
				os.MkdirAll(filepath.Dir(path), 0o755)
				if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			c := startServe(t, clientOptions{}, "--profile", profile, "--workspace", ws)
			bash := func(command string) string {
				text, _, _ := c.call(t, "bash", map[string]any{"command": command, "description": "Try to widen the sandbox"})
				return text
			}
			attacks := []string{"mv " + filepath.Dir(profile) + " " + filepath.Dir(profile) + ".old"}
			for path := range files {
				attacks = append(attacks, "echo 'extends: default' > "+path)
			}
			for _, attack := range attacks {
				if text := bash(attack); !strings.Contains(text, "[exit code: 1]") {
					t.Errorf("%s: %q", attack, text)
				}
			}
			for path, text := range files {
				if b, err := os.ReadFile(path); err != nil || string(b) != text {
					t.Fatalf("%s: %q, %v", path, b, err)
				}
			}
			pid := strconv.Itoa(c.cmd.Process.Pid)
			if text := bash("cat /proc/" + pid + "/environ"); text != "[stderr]\ncat: /proc/"+pid+"/environ: No such file or directory\n[exit code: 1]" {
				t.Errorf("dsh's environment: %q", text)
			}
			victim := filepath.Join(os.Getenv("HOME"), "dsh-e2e-confined-"+pid)
			t.Cleanup(func() { os.Remove(victim) })
			if text := bash("touch " + victim); !strings.Contains(text, "[sandbox: file access denied under workspace-write mode]") {
				t.Errorf("writing outside the workspace: %q", text)
			}
			if _, err := os.Stat(victim); err == nil {
				t.Fatal("the sandbox was widened")
			}
		})
	}
}

// `exec 7>>file; dsh call …`: a descriptor dsh inherits without close-on-exec never
// reaches a confined command.
func TestCallInheritedDescriptorDoesNotLeak(t *testing.T) {
	ws := t.TempDir()
	leak := filepath.Join(t.TempDir(), "leak")
	f, err := os.OpenFile(leak, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(dshBin, "call", "--profile", "sandbox", "--workspace", ws, "bash",
		`{"command":"for n in $(seq 3 64); do test -e /proc/$$/fd/$n && echo open $n; done; echo checked; echo pwned >&3","description":"Write to an inherited descriptor"}`)
	cmd.ExtraFiles = []*os.File{f} // fd 3 in dsh, inherited as `exec 3>>leak` would
	out, _ := cmd.CombinedOutput()
	want := "checked\n[stderr]\nbash: line 1: 3: Bad file descriptor\n[exit code: 1]"
	if string(out) != want {
		t.Fatalf("output:\n got %q\nwant %q", out, want)
	}
	if b, _ := os.ReadFile(leak); len(b) != 0 {
		t.Fatalf("wrote %q through the inherited descriptor", b)
	}
}

// Editing the watched profile to widen the sandbox is applied, and logged at WARN.
func TestServeWideningReloadIsLogged(t *testing.T) {
	ws := t.TempDir()
	profile := filepath.Join(t.TempDir(), "profile.yaml")
	write := func(text string) {
		tmp := profile + ".tmp"
		if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, profile); err != nil {
			t.Fatal(err)
		}
	}
	write("extends: sandbox\nplugins:\n  - id: bash\n    config: {network: deny}\n")
	c := startServe(t, clientOptions{}, "--profile", profile, "--workspace", ws)
	write("extends: sandbox\nplugins:\n  - id: bash\n    config: {network: allow}\n")
	const line = "profile reload widens confinement: bash-sandbox network deny → allow"
	waitFor(t, 10*time.Second, "the widening to be logged", func() bool { return strings.Contains(c.stderr.String(), line) })
	if !strings.Contains(c.stderr.String(), "WARN") {
		t.Fatalf("not at WARN:\n%s", c.stderr.String())
	}
}

func canonDir(t *testing.T, dir string) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
