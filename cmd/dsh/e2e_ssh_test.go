package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/sshtest"
)

// The dsh binary over a real sshd: a profile that extends default and swaps the
// executor to bash-ssh runs commands on the host, and `dsh status` shows the
// connection, or the untrusted host key.
func TestSSHExecutor(t *testing.T) {
	srv := sshtest.Start(t)
	ws := t.TempDir()
	remote := t.TempDir() // the executor's cwd "on the remote host" (this machine)
	write := func(name, knownHosts string) string {
		return writeSSHProfile(t, srv, filepath.Join(ws, name), knownHosts, remote)
	}
	good := write("ssh.yaml", srv.KnownHostsFile)
	if out, errOut, code := runDsh(t, ws, "check", "--profile", good); code != 0 {
		t.Fatalf("check: %d %s %s", code, out, errOut)
	}
	out, errOut, code := runDsh(t, ws, "call", "--profile", good, "bash", `{"command":"pwd; echo $DSH_SHELL; exit 3","description":"Run remotely"}`)
	if code != 0 || out != remote+"\n1\n[exit code: 3]" {
		t.Errorf("call: exit %d, %q, stderr %s", code, out, errOut)
	}
	// The row's detail shows the connection (the text form carries it).
	out, _, code = runDsh(t, ws, "status", "--profile", good)
	if !containsLine(out, "ssh", "ssh  ", "active", "connected to "+srv.User+"@"+srv.Addr+" (1 connection, 0 commands running)") ||
		!containsLine(out, "bash", "bash-ssh", "active", "") || code != 0 {
		t.Errorf("status:\n%s", out)
	}

	kh := filepath.Join(ws, "other_hosts")
	srv.TrustHostKey(kh, sshtest.NewHostKey(t))
	bad := write("untrusted.yaml", kh)
	out, _, _ = runDsh(t, ws, "status", "--profile", bad, "--json")
	var st struct {
		Rows []struct{ ID, Plugin, State, Error string }
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status: %v %s", err, out)
	}
	want := "ssh: host key for " + srv.Addr + " is not trusted by " + kh
	found := false
	for _, r := range st.Rows {
		if r.ID == "ssh" {
			found = r.State == "failed" && r.Error == want
			if !found {
				t.Errorf("ssh row with an untrusted key: %+v\nwant failed %q", r, want)
			}
		}
	}
	if !found {
		t.Errorf("no failed ssh row in %s", out)
	}

	// The shipped example parses and validates (it names a host that does not exist).
	example, err := filepath.Abs(filepath.Join("..", "..", "examples", "ssh", "profile.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := runDsh(t, ws, "check", "--profile", example); code != 0 {
		t.Errorf("check examples/ssh/profile.yaml: %d %s %s", code, out, errOut)
	}
}

// If dsh dies (SIGKILL) while a command runs on the remote host, the remote command
// does not outlive it: the connection's control shell sees the connection go and kills
// what it ran.
func TestSSHExecutorCrashCleanup(t *testing.T) {
	srv := sshtest.Start(t)
	ws := t.TempDir()
	path := writeSSHProfile(t, srv, filepath.Join(ws, "ssh.yaml"), srv.KnownHostsFile, ws)
	pidFile := filepath.Join(ws, "pid")
	cmd := exec.Command(dshBin, "call", "--profile", path, "bash",
		`{"command":"sleep 300 & echo $$ > `+pidFile+`; wait","description":"Wait for a long time"}`)
	cmd.Dir = ws
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := readPidFile(t, pidFile)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitFor(t, 10*time.Second, "the remote command to die with dsh", func() bool { return len(sshtest.GroupMembers(pid)) == 0 })
}

// containsLine reports whether the status table has a row line with these fields (the
// notes column as a prefix).
func containsLine(table, id, plugin, state, notes string) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == id && f[1] == strings.TrimSpace(plugin) && f[2] == state &&
			strings.HasPrefix(strings.TrimSpace(strings.SplitN(line, state, 2)[1]), notes) {
			return true
		}
	}
	return false
}

// writeSSHProfile writes, at path, the default profile with bash-ssh as its executor over
// srv (trusting the host keys in knownHosts), cwd as the remote working directory, and a
// dsh home and spill root of the test's own.
func writeSSHProfile(t *testing.T, srv *sshtest.Server, path, knownHosts, cwd string) string {
	t.Helper()
	profile := fmt.Sprintf(`extends: default
plugins:
  - id: shell-env
    config: {dshHome: %q}
  - id: ssh
    name: ssh
    config: {address: %q, user: %q, identityFile: %q, knownHostsFile: %q, spillRoot: %q}
  - id: bash
    name: bash-ssh
    config: {cwd: %q}
`, filepath.Join(filepath.Dir(path), "home"), srv.Addr, srv.User, srv.IdentityFile, knownHosts, t.TempDir(), cwd)
	if err := os.WriteFile(path, []byte(profile), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
