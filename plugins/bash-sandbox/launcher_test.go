package bashsandbox_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	bashsandbox "github.com/dsh-dev/dsh/plugins/bash-sandbox"
	"github.com/dsh-dev/dsh/plugins/shell"
)

// ran is how one process ended.
type ran struct {
	code   *int // nil after a signal
	signal string
	stdout string
	stderr string
}

func (r ran) String() string {
	code := "signal " + r.signal
	if r.code != nil {
		code = "exit " + strconv.Itoa(*r.code)
	}
	return fmt.Sprintf("%s, stdout %q, stderr %q", code, r.stdout, r.stderr)
}

func (r ran) exit() int {
	if r.code == nil {
		return -1
	}
	return *r.code
}

func (r ran) verdict() bashsandbox.Verdict { return bashsandbox.Classify(r.code, r.stderr) }

// testEnv is the confined commands' environment: English messages, a real PATH and HOME.
func testEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LC_ALL=C"}
}

// runArgv runs argv to completion in dir.
func runArgv(t *testing.T, dir string, argv ...string) ran {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = testEnv()
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := ran{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run %q: %v", argv, err)
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		r.signal = ws.Signal().String()
	} else {
		c := ws.ExitStatus()
		r.code = &c
	}
	return r
}

// confined runs `bash -c script bash args...` through the launcher under p, with argv
// built by LauncherArgv (which must re-execute this very test binary).
func confined(t *testing.T, p bashsandbox.LaunchPolicy, script string, args ...string) ran {
	t.Helper()
	argv, err := bashsandbox.LauncherArgv(p, append([]string{"bash", "-c", script, "bash"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	return runArgv(t, t.TempDir(), argv...)
}

// layout is a workspace, a temp dir standing in for the platform temp areas, and a
// directory outside both, none of them inside another.
type layout struct{ base, ws, tmp, outside string }

func newLayout(t *testing.T) layout {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l := layout{base: base, ws: filepath.Join(base, "ws"), tmp: filepath.Join(base, "tmp"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{l.ws, l.tmp, l.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(l.ws, "readme"), []byte("workspace file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l layout) readOnly(network string) bashsandbox.LaunchPolicy {
	return bashsandbox.LaunchPolicy{Mode: shell.ModeReadOnly, Network: network}
}

func (l layout) workspaceWrite(network string) bashsandbox.LaunchPolicy {
	return bashsandbox.LaunchPolicy{Mode: shell.ModeWorkspaceWrite, WorkspaceRoot: l.ws, WritableRoots: []string{l.tmp}, Network: network}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// mustBeDenied asserts a sandbox denial: exit 1 with "Permission denied", classified as a
// denial and not a runner failure.
func mustBeDenied(t *testing.T, what string, r ran) {
	t.Helper()
	if r.exit() != 1 || !strings.Contains(r.stderr, "Permission denied") {
		t.Fatalf("%s: want exit 1 with Permission denied, got %v", what, r)
	}
	if v := r.verdict(); !v.Denied || v.RunnerFailed {
		t.Fatalf("%s: classified %+v, want a denial", what, v)
	}
}

func mustSucceed(t *testing.T, what string, r ran) {
	t.Helper()
	if r.exit() != 0 {
		t.Fatalf("%s: want exit 0, got %v", what, r)
	}
	if v := r.verdict(); v.Denied || v.RunnerFailed {
		t.Fatalf("%s: a success classified %+v", what, v)
	}
}

func TestLauncherArgvReexecutesThisBinary(t *testing.T) {
	p := bashsandbox.LaunchPolicy{Mode: shell.ModeReadOnly, Network: bashsandbox.NetworkDeny}
	argv, err := bashsandbox.LauncherArgv(p, []string{"bash", "-c", "echo hi"})
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	if len(argv) != 6 || argv[0] != exe || argv[1] != bashsandbox.LauncherArg ||
		argv[2] != `{"mode":"read-only","network":"deny"}` || strings.Join(argv[3:], " ") != "bash -c echo hi" {
		t.Fatalf("argv = %q", argv)
	}

	bad := []struct {
		p    bashsandbox.LaunchPolicy
		argv []string
		want string
	}{
		{p, nil, "expected a non-empty program name"},
		{p, []string{""}, "expected a non-empty program name"},
		{bashsandbox.LaunchPolicy{Mode: "wide-open", Network: "deny"}, []string{"true"}, `unknown sandbox mode "wide-open"`},
		{bashsandbox.LaunchPolicy{Mode: shell.ModeDangerFullAccess, Network: "deny"}, []string{"true"}, "needs no launcher"},
		{bashsandbox.LaunchPolicy{Mode: shell.ModeReadOnly, Network: "maybe"}, []string{"true"}, `invalid network policy "maybe"`},
		{bashsandbox.LaunchPolicy{Mode: shell.ModeReadOnly, Network: "deny", WritableRoots: []string{"/tmp"}}, []string{"true"}, "cannot name writable roots"},
		{bashsandbox.LaunchPolicy{Mode: shell.ModeWorkspaceWrite, Network: "deny"}, []string{"true"}, "needs a workspace root"},
		{bashsandbox.LaunchPolicy{Mode: shell.ModeWorkspaceWrite, Network: "deny", WorkspaceRoot: "rel/dir"}, []string{"true"}, "not a clean absolute path"},
		{bashsandbox.LaunchPolicy{Mode: shell.ModeWorkspaceWrite, Network: "deny", WorkspaceRoot: "/w", WritableRoots: []string{"/tmp/../etc"}}, []string{"true"}, "not a clean absolute path"},
	}
	for _, tc := range bad {
		if _, err := bashsandbox.LauncherArgv(tc.p, tc.argv); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LauncherArgv(%+v, %q): err = %v, want %q", tc.p, tc.argv, err, tc.want)
		}
	}
}

func TestReadOnly(t *testing.T) {
	noProcessLeft(t)
	l := newLayout(t)
	for _, network := range []string{bashsandbox.NetworkDeny, bashsandbox.NetworkAllow} {
		t.Run("network "+network, func(t *testing.T) {
			p := l.readOnly(network)
			target := filepath.Join(l.ws, "x")
			mustBeDenied(t, "touch in the workspace", confined(t, p, `touch "$1"`, target))
			if exists(target) {
				t.Fatal("read-only created a file in the workspace")
			}
			mustBeDenied(t, "write to the temp dir", confined(t, p, `echo data > "$1"`, filepath.Join(l.tmp, "y")))
			mustBeDenied(t, "mkdir", confined(t, p, `mkdir "$1"`, filepath.Join(l.ws, "d")))
			mustBeDenied(t, "remove", confined(t, p, `rm "$1"`, filepath.Join(l.ws, "readme")))
			mustBeDenied(t, "truncate", confined(t, p, `truncate -s 0 "$1"`, filepath.Join(l.ws, "readme")))
			if b, _ := os.ReadFile(filepath.Join(l.ws, "readme")); string(b) != "workspace file\n" {
				t.Fatalf("read-only changed a workspace file: %q", b)
			}

			r := confined(t, p, `cat "$1/readme" && head -c 5 /etc/passwd && ls / >/dev/null && ls "$1" && cat /proc/self/status >/dev/null && echo ok`, l.ws)
			mustSucceed(t, "reads anywhere", r)
			if !strings.HasPrefix(r.stdout, "workspace file\n") || !strings.HasSuffix(r.stdout, "readme\nok\n") {
				t.Fatalf("reads: stdout %q", r.stdout)
			}

			r = confined(t, p, `echo discarded > /dev/null && head -c 3 /dev/zero | od -An -tx1 && echo to-stderr > /dev/stderr && echo to-stdout > /dev/stdout && cat <<EOF
heredoc
EOF`)
			mustSucceed(t, "pseudo-devices, own pipes and a heredoc", r)
			if r.stdout != " 00 00 00\nto-stdout\nheredoc\n" || r.stderr != "to-stderr\n" {
				t.Fatalf("devices: %v", r)
			}
			r = confined(t, p, `echo x > /dev/full`)
			if r.exit() != 1 || !strings.Contains(r.stderr, "No space left on device") || r.verdict().Denied {
				t.Fatalf("/dev/full is writable (and full), not denied: %v", r)
			}
		})
	}
}

func TestWorkspaceWrite(t *testing.T) {
	noProcessLeft(t)
	l := newLayout(t)
	p := l.workspaceWrite(bashsandbox.NetworkDeny)

	r := confined(t, p, `set -e
cd "$1"
echo one > a.txt; mkdir -p sub/deeper; echo two > sub/deeper/b.txt
mv a.txt sub/a.txt           # a rename across directories
ln -s sub/a.txt link; ln sub/deeper/b.txt hard
rm hard; truncate -s 1 sub/deeper/b.txt
echo tmp > "$2/t.txt"; mv "$2/t.txt" sub/from-tmp.txt
cat sub/a.txt sub/from-tmp.txt`, l.ws, l.tmp)
	mustSucceed(t, "writes in the workspace and the temp dir", r)
	if r.stdout != "one\ntmp\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
	if b, _ := os.ReadFile(filepath.Join(l.ws, "sub/deeper/b.txt")); string(b) != "t" {
		t.Fatalf("truncate in the workspace: %q", b)
	}

	home, _ := os.UserHomeDir()
	for _, dir := range []string{"/etc", home, "/root", l.outside, "/usr/local"} {
		target := filepath.Join(dir, fmt.Sprintf("dsh-sandbox-test-%d", os.Getpid()))
		t.Cleanup(func() { os.Remove(target) })
		mustBeDenied(t, "write to "+dir, confined(t, p, `echo x > "$1"`, target))
		if exists(target) {
			t.Fatalf("workspace-write created %s", target)
		}
	}
	mustBeDenied(t, "mkdir outside", confined(t, p, `mkdir "$1/d"`, l.outside))
	mustBeDenied(t, "move a workspace file out", confined(t, p, `mv "$1/link" "$2/"`, l.ws, l.outside))

	// A symlink inside the workspace pointing outside cannot be written through.
	victim := filepath.Join(l.outside, "victim")
	if err := os.WriteFile(victim, []byte("original\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(l.outside, filepath.Join(l.ws, "escape-dir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(l.ws, "escape-file")); err != nil {
		t.Fatal(err)
	}
	mustBeDenied(t, "write through a file symlink", confined(t, p, `echo pwned > "$1/escape-file"`, l.ws))
	mustBeDenied(t, "create through a directory symlink", confined(t, p, `echo pwned > "$1/escape-dir/new"`, l.ws))
	mustBeDenied(t, "truncate through a symlink", confined(t, p, `truncate -s 0 "$1/escape-file"`, l.ws))
	if b, _ := os.ReadFile(victim); string(b) != "original\n" || exists(filepath.Join(l.outside, "new")) {
		t.Fatalf("wrote outside the workspace through a symlink: victim %q", b)
	}
	// Replacing the link itself is a workspace operation and is allowed.
	mustSucceed(t, "replace the symlink itself", confined(t, p, `rm "$1/escape-file" && echo mine > "$1/escape-file"`, l.ws))
}

func TestWorkspaceWriteDefaultTempDirs(t *testing.T) {
	noProcessLeft(t)
	l := newLayout(t)
	lp, err := bashsandbox.NewLaunchPolicy(shell.SandboxPolicy{Mode: shell.ModeWorkspaceWrite, WorkspaceRoot: l.ws}, bashsandbox.NetworkDeny)
	if err != nil {
		t.Fatal(err)
	}
	tmp, _ := filepath.EvalSymlinks(os.TempDir())
	if !slices.Contains(lp.WritableRoots, tmp) || !slices.Contains(lp.WritableRoots, "/tmp") {
		t.Fatalf("writable roots %q lack the temp dir %q", lp.WritableRoots, tmp)
	}
	f, err := os.CreateTemp("", "dsh-sandbox-ww-")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	defer os.Remove(f.Name())
	mustSucceed(t, "write to the real temp dir", confined(t, lp, `echo x > "$1" && touch "$2/y"`, f.Name(), l.ws))

	ro, err := bashsandbox.NewLaunchPolicy(shell.SandboxPolicy{Mode: shell.ModeReadOnly, WorkspaceRoot: l.ws}, bashsandbox.NetworkDeny)
	if err != nil || ro.WorkspaceRoot != "" || len(ro.WritableRoots) != 0 {
		t.Fatalf("read-only launch policy %+v, %v: must carry no writable roots", ro, err)
	}
	mustBeDenied(t, "read-only: the real temp dir", confined(t, ro, `echo x > "$1"`, f.Name()))
	if _, err := bashsandbox.NewLaunchPolicy(shell.SandboxPolicy{Mode: shell.ModeDangerFullAccess, WorkspaceRoot: l.ws}, bashsandbox.NetworkDeny); err == nil {
		t.Fatal("danger-full-access produced a launch policy")
	}
}

// tcpListener accepts and closes connections on 127.0.0.1 until the test ends.
func tcpListener(t *testing.T) (port string, accepted func() int) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

const tcpConnect = `exec 3<>"/dev/tcp/127.0.0.1/$1" && echo connected`

func TestNetwork(t *testing.T) {
	noProcessLeft(t)
	l := newLayout(t)
	port, accepted := tcpListener(t)

	for _, p := range []bashsandbox.LaunchPolicy{l.readOnly(bashsandbox.NetworkDeny), l.workspaceWrite(bashsandbox.NetworkDeny)} {
		r := confined(t, p, tcpConnect, port)
		mustBeDenied(t, p.Mode+"/deny: TCP connect", r)
	}
	if n := accepted(); n != 0 {
		t.Fatalf("%d connections got through a denied network", n)
	}
	for _, p := range []bashsandbox.LaunchPolicy{l.readOnly(bashsandbox.NetworkAllow), l.workspaceWrite(bashsandbox.NetworkAllow)} {
		r := confined(t, p, tcpConnect, port)
		mustSucceed(t, p.Mode+"/allow: TCP connect", r)
		if r.stdout != "connected\n" {
			t.Fatalf("stdout %q", r.stdout)
		}
	}
	// Unconfined (what danger-full-access runs): the same command connects.
	if r := runArgv(t, l.base, "bash", "-c", tcpConnect, "bash", port); r.exit() != 0 {
		t.Fatalf("unconfined connect failed: %v", r)
	}
	waitFor(t, "three accepted connections", func() bool { return accepted() == 3 })
}

// TestNetworkBindAndMultipathTCP covers what bash cannot do: listening, and Multipath
// TCP sockets, which Landlock does not restrict and the launcher's seccomp filter does.
func TestNetworkBindAndMultipathTCP(t *testing.T) {
	noProcessLeft(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	l := newLayout(t)
	port, accepted := tcpListener(t)
	const bind = `import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); print("listening")`
	const mptcp = `import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
s.connect(("127.0.0.1", int(sys.argv[1])))
print("connected")`

	mptcpOK := runArgv(t, l.base, "python3", "-c", mptcp, port)
	for _, p := range []bashsandbox.LaunchPolicy{l.readOnly(bashsandbox.NetworkDeny), l.workspaceWrite(bashsandbox.NetworkDeny)} {
		mustBeDenied(t, p.Mode+": TCP bind", confined(t, p, `python3 -c "$1"`, bind))
		if mptcpOK.exit() == 0 {
			mustBeDenied(t, p.Mode+": MPTCP connect", confined(t, p, `python3 -c "$1" "$2"`, mptcp, port))
		}
	}
	mustSucceed(t, "allow: TCP bind", confined(t, l.readOnly(bashsandbox.NetworkAllow), `python3 -c "$1"`, bind))
	if mptcpOK.exit() != 0 {
		t.Logf("MPTCP unavailable on this host, its denial is not exercised: %v", mptcpOK)
		return
	}
	mustSucceed(t, "allow: MPTCP connect", confined(t, l.readOnly(bashsandbox.NetworkAllow), `python3 -c "$1" "$2"`, mptcp, port))
	waitFor(t, "two accepted connections", func() bool { return accepted() == 2 })
}

func TestSignalsStayInsideTheSandbox(t *testing.T) {
	noProcessLeft(t)
	l := newLayout(t)
	outsider := exec.Command("sleep", "60")
	if err := outsider.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { outsider.Process.Kill(); outsider.Wait() }()
	pid := strconv.Itoa(outsider.Process.Pid)

	r := confined(t, l.workspaceWrite(bashsandbox.NetworkAllow), `kill -TERM "$1"`, pid)
	if r.exit() != 1 || !strings.Contains(r.stderr, "Operation not permitted") || !r.verdict().Denied {
		t.Fatalf("signalling a process outside the sandbox: %v (verdict %+v)", r, r.verdict())
	}
	if err := outsider.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the outside process did not survive: %v", err)
	}
	// Inside the sandbox signals work, and a signal death is never a denial.
	r = confined(t, l.readOnly(bashsandbox.NetworkDeny), `sleep 60 & kill -TERM $! && wait $!; echo "child: $?"; kill -TERM $$`)
	if r.signal != "terminated" || r.stdout != "child: 143\n" {
		t.Fatalf("signals inside the sandbox: %v", r)
	}
	if v := r.verdict(); v.Denied || v.RunnerFailed {
		t.Fatalf("a signal death classified %+v", v)
	}
}

// TestHarnessNeverConfined: running launchers leaves this process unrestricted, while
// the launched command carries no_new_privs and, with the network denied, the seccomp
// filter.
func TestHarnessNeverConfined(t *testing.T) {
	noProcessLeft(t)
	l := newLayout(t)
	status := `grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\t ' ' '`
	r := confined(t, l.readOnly(bashsandbox.NetworkDeny), status)
	want := "NoNewPrivs: 1\nSeccomp: 0\n"
	if bashsandbox.MPTCPFilterSupported {
		want = "NoNewPrivs: 1\nSeccomp: 2\n"
	}
	if r.stdout != want {
		t.Fatalf("confined command status:\n%s\nwant:\n%s", r.stdout, want)
	}
	if r := confined(t, l.readOnly(bashsandbox.NetworkAllow), status); r.stdout != "NoNewPrivs: 1\nSeccomp: 0\n" {
		t.Fatalf("network allow: no seccomp filter expected:\n%s", r.stdout)
	}
	own, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(own), "NoNewPrivs:\t0\n") || !strings.Contains(string(own), "Seccomp:\t0\n") {
		t.Fatalf("the harness process itself got restricted:\n%s", own)
	}
	f := filepath.Join(l.outside, "harness-can-write")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatalf("the harness process cannot write: %v", err)
	}
}

// launchRaw runs this binary as the launcher with raw arguments (bypassing
// LauncherArgv's validation, as a corrupted or hostile argv would).
func launchRaw(t *testing.T, dir string, args ...string) ran {
	t.Helper()
	return runArgv(t, dir, append([]string{os.Args[0], bashsandbox.LauncherArg}, args...)...)
}

func TestLauncherFailureIsARunnerFailure(t *testing.T) {
	noProcessLeft(t)
	l := newLayout(t)
	marker := filepath.Join(l.ws, "marker")
	touch := []string{"bash", "-c", `touch "$1"`, "bash", marker}
	noExec := filepath.Join(l.ws, "not-executable")
	if err := os.WriteFile(noExec, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ww := func(root string) string {
		return fmt.Sprintf(`{"mode":"workspace-write","workspaceRoot":%q,"network":"deny"}`, root)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no arguments", nil, "dsh-sandbox: launcher usage: <policy JSON> <program> [args...]"},
		{"no program", []string{`{"mode":"read-only","network":"deny"}`}, "dsh-sandbox: launcher usage"},
		{"malformed policy", append([]string{`{"mode":`}, touch...), "dsh-sandbox: invalid launch policy: unexpected EOF"},
		{"unknown policy key", append([]string{`{"mode":"read-only","network":"deny","extra":1}`}, touch...), `dsh-sandbox: invalid launch policy: json: unknown field "extra"`},
		{"trailing data", append([]string{`{"mode":"read-only","network":"deny"} {}`}, touch...), "dsh-sandbox: invalid launch policy: trailing data"},
		{"unconfined mode", append([]string{`{"mode":"danger-full-access","network":"deny"}`}, touch...), `dsh-sandbox: invalid launch policy: mode "danger-full-access" runs unconfined and needs no launcher`},
		{"missing program", []string{`{"mode":"read-only","network":"deny"}`, "dsh-no-such-program", "x"}, "dsh-sandbox: exec dsh-no-such-program: executable file not found in $PATH"},
		{"program not executable", []string{`{"mode":"read-only","network":"deny"}`, noExec}, "dsh-sandbox: exec " + noExec + ": permission denied"},
		{"missing workspace root", append([]string{ww(filepath.Join(l.base, "gone"))}, touch...), "dsh-sandbox: workspace root " + filepath.Join(l.base, "gone") + ": no such file or directory\n"},
		{"workspace root is a file", append([]string{ww(noExec)}, touch...), "dsh-sandbox: workspace root " + noExec + ": not a directory\n"},
		{"multi-line error text", append([]string{"{\n\"mode\": 7}"}, touch...), "dsh-sandbox: invalid launch policy: json: cannot unmarshal number"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := launchRaw(t, l.base, tc.args...)
			if r.exit() != bashsandbox.RunnerFailureExitCode {
				t.Fatalf("want exit 125, got %v", r)
			}
			if strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") || !strings.HasPrefix(r.stderr, tc.want) || r.stdout != "" {
				t.Fatalf("want exactly one stderr line starting %q, got %v", tc.want, r)
			}
			if v := r.verdict(); !v.RunnerFailed || v.Denied {
				t.Fatalf("classified %+v, want a runner failure", v)
			}
			if exists(marker) {
				t.Fatal("the command ran although the launcher failed")
			}
		})
	}
	// And the same workspace root, existing, runs the command.
	mustSucceed(t, "valid policy", launchRaw(t, l.base, append([]string{ww(l.ws)}, touch...)...))
	if !exists(marker) {
		t.Fatal("the command did not run under a valid policy")
	}
}

// TestCommandExit125IsNotARunnerFailure: a confined command exiting 125 by itself is an
// ordinary failure, even when it imitates the launcher's line among other output.
func TestCommandExit125IsNotARunnerFailure(t *testing.T) {
	noProcessLeft(t)
	l := newLayout(t)
	r := confined(t, l.readOnly(bashsandbox.NetworkDeny), `echo "some output" >&2; echo "dsh-sandbox: fake" >&2; exit 125`)
	if r.exit() != 125 {
		t.Fatalf("got %v", r)
	}
	if v := r.verdict(); v.RunnerFailed || v.Denied {
		t.Fatalf("classified %+v", v)
	}
}

// TestLauncherDispatchedEarly: a launcher process execs its command before the rest of
// the binary is initialised — only the packages the runtime's own start-up needs run
// first (Go initialises packages in import-path order as their imports become ready,
// and the launcher's package imports nothing else). This test binary links the whole
// bash-sandbox stack (container, fx, koanf, YAML, the MCP-free plugins, crypto via
// net/http…), like dsh does.
func TestLauncherDispatchedEarly(t *testing.T) {
	cmd := exec.Command(os.Args[0], bashsandbox.LauncherArg)
	cmd.Env = append(testEnv(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != bashsandbox.RunnerFailureExitCode {
		t.Fatalf("launcher without arguments: %v; stderr %q", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	if last != "dsh-sandbox: launcher usage: <policy JSON> <program> [args...]" {
		t.Fatalf("last line %q", last)
	}
	var before []string
	for _, l := range lines[:len(lines)-1] {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "init" {
			t.Fatalf("unexpected stderr line %q", l)
		}
		before = append(before, f[1])
	}
	for _, pkg := range before {
		for _, heavy := range []string{"github.com/", "golang.org/", "go.uber.org/fx", "go.uber.org/zap/zapcore", "go.yaml.in/",
			"encoding/json", "encoding/gob", "crypto/internal/fips140/", "net", "regexp", "text/template"} {
			if strings.HasPrefix(pkg, heavy) {
				t.Errorf("%s was initialised before the launcher ran", pkg)
			}
		}
	}
	if len(before) > 30 {
		t.Errorf("%d packages initialised before the launcher ran: %q", len(before), before)
	}
	t.Logf("initialised before the launcher: %q", before)
}
