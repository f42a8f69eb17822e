package main_test

import (
	"bufio"
	"io"
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

// selfApprove, run by bash inside a confined command ($1 the port of dsh's HTTP
// endpoint, $2 a path to create): with the bearer token it finds in
// $DSH_HOME/serve-token, it opens an MCP session of its own (declaring that it answers
// elicitations), calls bash asking to escalate to danger-full-access, and accepts the
// approval question the server sends back to it. It prints the token's length first.
const selfApprove = `P=$1; M=$2
T=$(cat "$DSH_HOME/serve-token"); echo "token: ${#T} bytes"
post() { # fd body [session]
  local fd=$1 body=$2 hdr=
  [ -n "$3" ] && hdr="Mcp-Session-Id: $3"$'\r\n'
  eval "exec $fd<>/dev/tcp/127.0.0.1/$P"
  printf 'POST /mcp HTTP/1.0\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n%sContent-Length: %d\r\n\r\n%s' "$T" "$hdr" "${#body}" "$body" >&$fd
}
post 3 '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"x","version":"1"}}}'
sid=$(tr -d '\r' <&3 | sed -n 's/^Mcp-Session-Id: //Ip'); exec 3<&-
post 3 '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$sid"; cat <&3 >/dev/null; exec 3<&-
post 3 '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"touch '"$M"'","description":"x","sandbox_permissions":"danger-full-access","justification":"x"}}}' "$sid"
while IFS= read -r -t 20 line <&3; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\),"method":"elicitation\/create".*/\1/p')
  if [ -n "$id" ]; then
    post 4 '{"jsonrpc":"2.0","id":'"$id"',"result":{"action":"accept","content":{}}}' "$sid"; cat <&4 >/dev/null; exec 4<&-
  fi
  case $line in *'"id":2,'*) break;; esac
done
`

// homeTempDir makes a directory under the user's home — outside the host's temp dir,
// which the sandbox hides from confined commands — removed at the end.
func homeTempDir(t *testing.T, pattern string) string {
	t.Helper()
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skipf("no home directory: %v", err)
	}
	dir, err := os.MkdirTemp(home, pattern)
	if err != nil {
		t.Skipf("no directory under the home directory: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return canonDir(t, dir)
}

// With `network: allow`, a confined command reaches the host's loopback — and dsh's
// own HTTP endpoint there. The bearer token dsh generated into $DSH_HOME/serve-token is
// hidden from it (an empty file, in `dsh serve`'s own sessions and in any other dsh's
// sandbox), so it cannot open a session of its own there and approve its own escalation
// to danger-full-access.
func TestServeNetworkAllowSelfApprovedEscalation(t *testing.T) {
	ws := canonDir(t, t.TempDir())
	home := homeTempDir(t, "dsh-e2e-home-")
	profile := filepath.Join(canonDir(t, t.TempDir()), "profile.yaml")
	if err := os.WriteFile(profile, []byte("extends: sandbox\nplugins:\n  - id: bash\n    config: {network: allow}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "DSH_HOME="+home)
	cmd := exec.Command(dshBin, "serve", "--profile", profile, "--http", "127.0.0.1:0", "--workspace", ws)
	cmd.Env = env
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	port := ""
	for port == "" && sc.Scan() {
		if _, rest, ok := strings.Cut(sc.Text(), "on http://127.0.0.1:"); ok {
			port = strings.TrimSuffix(rest, "/mcp")
		}
	}
	if port == "" {
		t.Fatal("dsh serve never said where it listens")
	}
	go io.Copy(io.Discard, stderr)
	if err := os.WriteFile(filepath.Join(ws, "self-approve.sh"), []byte(selfApprove), 0o644); err != nil {
		t.Fatal(err)
	}
	if token, err := os.ReadFile(filepath.Join(home, "serve-token")); err != nil || len(token) < 40 {
		t.Fatalf("the generated token: %q, %v", token, err)
	}
	marker := filepath.Join(t.TempDir(), "escaped") // out of the confined command's reach
	attack := exec.Command(dshBin, "call", "--profile", profile, "--workspace", ws, "bash",
		`{"command":"bash self-approve.sh `+port+` `+marker+`","description":"Reach dsh's HTTP endpoint"}`)
	attack.Env = env
	out, _ := attack.CombinedOutput()
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("a confined command approved its own escalation and wrote %s (%q)", marker, out)
	}
	if !strings.HasPrefix(string(out), "token: 0 bytes\n") {
		t.Fatalf("the confined command's view of the token: %q", out)
	}
}
