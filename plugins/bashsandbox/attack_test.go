package bashsandbox_test

// What "confined" guarantees (docs/sandbox.md, the security model), each tried
// the way an attacker would, through the real stack (see stack_test.go) and the real
// box, in read-only and in workspace-write. The attack helper (main_test.go)
// makes the system calls that bash cannot.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/shell"
)

var confinedModes = []string{shell.ModeReadOnly, shell.ModeWorkspaceWrite}

// forConfinedModes runs fn in each confined mode, with a stack of that default mode and
// a fresh workspace (and so a box of its own).
func forConfinedModes(t *testing.T, setup stackSetup, fn func(t *testing.T, st *stack, s *container.Session, ws string)) {
	for _, mode := range confinedModes {
		t.Run(mode, func(t *testing.T) {
			cfg := map[string]any{"defaultMode": mode}
			for k, v := range setup.bashConfig {
				cfg[k] = v
			}
			setup := setup
			setup.bashConfig = cfg
			st := newStack(t, setup)
			ws := workspace(t)
			fn(t, st, session("attack-"+mode, ws), ws)
		})
	}
}

// attackLine runs the helper's attack in s and returns its one line ("ok" or the
// error).
func attackLine(t *testing.T, st *stack, s *container.Session, op string, args ...string) string {
	t.Helper()
	cmd := helper(t) + " " + op
	for _, a := range args {
		cmd += " '" + a + "'"
	}
	res := st.bash(t, s, cmd)
	if res.IsError || !strings.HasSuffix(res.Text, "\n") || strings.Count(res.Text, "\n") != 1 {
		t.Fatalf("%s %q: %q (isError %v)", op, args, res.Text, res.IsError)
	}
	return strings.TrimSuffix(res.Text, "\n")
}

// No privilege: no capability in any set, an empty bounding set, no_new_privs — as
// root too (CI runs as root) — so mknod, raw and packet sockets, sethostname, network
// configuration and nested user namespaces are all refused.
func TestConfinedNoPrivilege(t *testing.T) {
	forConfinedModes(t, stackSetup{}, func(t *testing.T, st *stack, s *container.Session, ws string) {
		res := st.bash(t, s, `grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status | tr -s '\t ' ' '`)
		expect(t, res, "CapInh: 0000000000000000\nCapPrm: 0000000000000000\nCapEff: 0000000000000000\n"+
			"CapBnd: 0000000000000000\nCapAmb: 0000000000000000\nNoNewPrivs: 1\n", false)
		disk := filepath.Join(ws, "disk")
		mknod := "operation not permitted" // no CAP_MKNOD
		if s.SandboxMode == "" && st.defaultMode() == shell.ModeReadOnly {
			mknod = "permission denied" // Landlock refuses first: nothing is writable
		}
		for _, tc := range []struct {
			op   string
			args []string
			want string
		}{
			{"mknod-block", []string{disk}, mknod},
			{"socket", []string{"2", "3", "1"}, "operation not permitted"},              // AF_INET SOCK_RAW ICMP: no CAP_NET_RAW
			{"socket", []string{"17", "3", "0"}, "permission denied"},                   // AF_PACKET: the seccomp filter
			{"socket", []string{"10", "3", "58"}, "operation not permitted"},            // AF_INET6 raw ICMPv6
			{"sethostname", nil, "operation not permitted"},                             // no CAP_SYS_ADMIN
			{"lo-down", nil, "operation not permitted"},                                 // no CAP_NET_ADMIN
			{"userns", nil, "no space left on device"},                                  // nested user namespaces disabled
			{"write", []string{"/proc/sys/kernel/hostname"}, "read-only file system"},   // /proc/sys read-only
			{"write", []string{"/sys/fs/cgroup/cgroup.procs"}, "read-only file system"}, // no cgroup escape
			{"write", []string{"/proc/sysrq-trigger"}, "no such file or directory"},     // not even shown
			{"read", []string{"/sys/kernel/security/lsm"}, "no such file or directory"}, // securityfs not mounted
			{"socketpair", nil, "ok"},                                                   // what pipelines need still works
			{"socket", []string{"2", "1", "0"}, "ok"},                                   // a TCP socket may exist (connect is denied)
		} {
			if tc.args != nil && tc.args[0] == "/sys/kernel/security/lsm" {
				if _, err := os.Stat(tc.args[0]); err == nil {
					tc.want = "ok"
				}
			}
			if got := attackLine(t, st, s, tc.op, tc.args...); got != tc.want {
				t.Errorf("%s %q: %q, want %q", tc.op, tc.args, got, tc.want)
			}
		}
		if exists(disk) {
			t.Fatal("a block device was created")
		}
		if _, err := exec.LookPath("ip"); err == nil {
			expect(t, st.bash(t, s, "ip addr add 10.99.99.99/32 dev lo"), "[stderr]\nRTNETLINK answers: Operation not permitted\n"+
				deniedMarker(st.defaultMode())+"\n"+escalationHint+"\n[exit code: 2]", false)
		}
	})
}

// defaultMode is the stack's executor default mode.
func (st *stack) defaultMode() string {
	v, _ := container.Lookup(st.rt, shell.Service)
	return v.SandboxMode()
}

// Only fds 0–2 reach a command: a descriptor this process holds without close-on-exec
// (as dsh would, started with `exec 7>>file`) is not there, and writing to it fails.
func TestConfinedNoInheritedDescriptors(t *testing.T) {
	forConfinedModes(t, stackSetup{}, func(t *testing.T, st *stack, s *container.Session, ws string) {
		leak := filepath.Join(outsideTempDir(t, "dsh-sandbox-fd-"), "leak")
		fd, err := syscall.Open(leak, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_APPEND, 0o644) // no O_CLOEXEC
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(fd)
		// The box starts with this descriptor open in dsh.
		if got := attackLine(t, st, s, "fds"); got != "fds 0 1 2" {
			t.Fatalf("descriptors of a confined command: %q", got)
		}
		n := strconv.Itoa(fd)
		expect(t, st.bash(t, s, "echo pwned >&"+n), "[stderr]\nbash: line 1: "+n+": Bad file descriptor\n[exit code: 1]", false)
		if b, _ := os.ReadFile(leak); len(b) != 0 {
			t.Fatalf("wrote %q through an inherited descriptor", b)
		}
	})
}

// The writable set: the session's private /tmp (TMPDIR) in workspace-write, nothing in
// read-only; never the host's /tmp; each session its own; gone when the session ends.
func TestConfinedPrivateTmp(t *testing.T) {
	hostFile, err := os.CreateTemp("", "dsh-sandbox-host-")
	if err != nil {
		t.Fatal(err)
	}
	hostFile.Close()
	defer os.Remove(hostFile.Name())
	forConfinedModes(t, stackSetup{}, func(t *testing.T, st *stack, s *container.Session, ws string) {
		// The host's /tmp is not there at all.
		expect(t, st.bash(t, s, "test -e "+hostFile.Name()+" || echo hidden; echo $TMPDIR"), "hidden\n/tmp\n", false)
		name := fmt.Sprintf("dsh-private-%d-%s", os.Getpid(), st.defaultMode())
		res := st.bash(t, s, "echo mine > /tmp/"+name+" && cat /tmp/"+name)
		if st.defaultMode() == shell.ModeReadOnly {
			expect(t, res, deniedText("bash: line 1: /tmp/"+name+": Permission denied", shell.ModeReadOnly), false)
			return
		}
		expect(t, res, "mine\n", false)
		if exists("/tmp/" + name) {
			t.Fatal("the write reached the host's /tmp")
		}
		other := session("attack-other", ws)
		expect(t, st.bash(t, other, "cat /tmp/"+name), "[stderr]\ncat: /tmp/"+name+": No such file or directory\n[exit code: 1]", false)
		// It lives in the box's private tmpfs (of limits.tmpSize): nowhere on the host,
		// not even in the session's temp dir there, and the session's end removes it
		// with the box.
		if matches, _ := filepath.Glob(filepath.Join(os.TempDir(), "dsh-sandbox-"+strconv.Itoa(os.Getpid())+"-*", "s*", "tmp", name)); len(matches) != 0 {
			t.Fatalf("the private temp file is on the host: %q", matches)
		}
		st.rt.EndSession(s.ID)
		expect(t, st.bash(t, s, "cat /tmp/"+name), "[stderr]\ncat: /tmp/"+name+": No such file or directory\n[exit code: 1]", false)
	})
}

// Protected paths: .git and .dsh at the workspace root, the profile and the base it
// extends, and $DSH_HOME are read-only even in workspace-write: no hook, no
// core.fsmonitor, no profile rewrite (not even by moving its directory away), and the
// next unconfined git runs nothing planted.
func TestConfinedProtectedPaths(t *testing.T) {
	forConfinedModes(t, stackSetup{}, func(t *testing.T, st *stack, _ *container.Session, ws string) {
		git := func(args ...string) string {
			cmd := exec.Command("git", args...)
			cmd.Dir = ws
			cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+ws)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("git %q: %v\n%s", args, err, out)
			}
			return string(out)
		}
		git("init", "-q")
		conf := filepath.Join(ws, "conf", "deep")
		if err := os.MkdirAll(conf, 0o755); err != nil {
			t.Fatal(err)
		}
		base := filepath.Join(conf, "base.yaml")
		profile := filepath.Join(conf, "profile.yaml")
		home := filepath.Join(ws, "dsh-home")
		for path, text := range map[string]string{
			base:                                  "plugins: []\n",
			profile:                               "extends: ./base.yaml\nplugins: []\n",
			filepath.Join(ws, ".dsh", "settings"): "x\n",
			filepath.Join(home, "serve-token"):    "secret\n",
		} {
			os.MkdirAll(filepath.Dir(path), 0o755)
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// The running composition's profile is the one in the workspace, and DSH_HOME
		// is inside it too.
		mode := st.defaultMode()
		if err := st.rt.ComposeFiles("protected", []string{profile, base},
			stackRows(stackSetup{bashConfig: map[string]any{"defaultMode": mode}}, st.root, home)); err != nil {
			t.Fatal(err)
		}
		st.lookup(t)
		s := session("protected-"+mode, ws)
		attacks := []string{
			"echo 'touch pwned' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
			"git config core.fsmonitor 'touch pwned-fsmonitor'",
			"mv .git .git-old",
			"rm -rf .git",
			"echo x > .dsh/settings",
			"mv .dsh .dsh-old",
			"echo 'extends: default' > " + profile,
			"echo 'plugins: []' > " + base,
			"mv conf conf-old",
			"mv conf/deep conf/deeper",
			"rm -rf conf",
			"echo x > " + filepath.Join(home, "serve-token"),
			"mv " + home + " " + home + "-old",
		}
		for _, a := range attacks {
			// Refused as a denial, or — moving or removing a mount point — with EBUSY.
			res := st.bash(t, s, a)
			if res.IsError || !strings.Contains(res.Text, "\n[exit code: ") ||
				!strings.Contains(res.Text, deniedMarker(mode)) && !strings.Contains(res.Text, "Device or resource busy") {
				t.Errorf("%s: %q", a, res.Text)
			}
		}
		for path, text := range map[string]string{
			base:                                  "plugins: []\n",
			profile:                               "extends: ./base.yaml\nplugins: []\n",
			filepath.Join(ws, ".dsh", "settings"): "x\n",
			filepath.Join(home, "serve-token"):    "secret\n",
		} {
			if b, err := os.ReadFile(path); err != nil || string(b) != text {
				t.Errorf("%s: %q, %v", path, b, err)
			}
		}
		if got := strings.TrimSpace(runGit(t, ws, "config", "--get", "core.fsmonitor")); got != "" {
			t.Fatalf("core.fsmonitor = %q", got)
		}
		git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "check")
		git("status", "--short")
		if exists(filepath.Join(ws, "pwned")) || exists(filepath.Join(ws, "pwned-fsmonitor")) || exists(filepath.Join(ws, ".git", "hooks", "pre-commit")) {
			t.Fatal("a planted hook ran")
		}
		// Ordinary files beside them stay writable in workspace-write.
		if mode == shell.ModeWorkspaceWrite {
			expect(t, st.bash(t, s, "echo ok > conf/deep/other && cat conf/deep/other"), "ok\n", false)
		}
	})
}

// runGit runs git in dir and returns its output (an error is output too).
func runGit(t *testing.T, dir string, args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// A protected path that did not exist when the box started is protected
// from the first command after it appeared (it cannot be made read-only before it
// exists without writing to the workspace): a `git init` in workspace-write works,
// and the next command cannot plant a hook.
func TestConfinedProtectedPathAppears(t *testing.T) {
	st := newStack(t, stackSetup{bashConfig: map[string]any{"defaultMode": "workspace-write"}})
	ws := workspace(t)
	s := session("appears", ws)
	expect(t, st.bash(t, s, "git init -q && echo inited"), "inited\n", false)
	res := st.bash(t, s, "echo 'touch pwned' > .git/hooks/pre-commit")
	expect(t, res, deniedText("bash: line 1: .git/hooks/pre-commit: Read-only file system", shell.ModeWorkspaceWrite), false)
}

// The pinned workspace: when the session's workspace path later resolves to another
// directory — renamed away and replaced by a symlink to /, as an attacker with a
// writable parent would — confined calls fail closed with an infrastructure error
// naming the workspace, and nothing runs. From inside, the workspace cannot be moved.
func TestConfinedWorkspacePinned(t *testing.T) {
	forConfinedModes(t, stackSetup{}, func(t *testing.T, st *stack, _ *container.Session, _ string) {
		parent := outsideTempDir(t, "dsh-sandbox-pin-")
		ws := filepath.Join(parent, "proj")
		if err := os.Mkdir(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		s := session("pinned-"+st.defaultMode(), ws)
		expect(t, st.bash(t, s, "pwd"), ws+"\n", false)
		res := st.bash(t, s, "cd .. && mv proj p2")
		if !strings.Contains(res.Text, "mv: cannot move 'proj' to 'p2': ") || !strings.Contains(res.Text, deniedMarker(st.defaultMode())) {
			t.Fatalf("moving the workspace from inside: %q", res.Text)
		}
		if err := os.Rename(ws, filepath.Join(parent, "p2")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/", ws); err != nil {
			t.Fatal(err)
		}
		marker := fmt.Sprintf("/etc/dsh-pinned-%d", os.Getpid())
		t.Cleanup(func() { os.Remove(marker) })
		want := `Error: sandbox policy: bash-sandbox: the workspace "` + ws + `" no longer resolves to the directory pinned when the session started (it now resolves to "/"); refusing to run confined commands in it`
		expect(t, st.bash(t, s, "touch "+marker), want, true)
		expect(t, st.bash(t, s, "touch "+marker, "run_in_background", true), want, true)
		if exists(marker) {
			t.Fatal("a command ran in the swapped workspace")
		}
		// Replaced by another directory: the same.
		os.Remove(ws)
		if err := os.Mkdir(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		res = st.bash(t, s, "true")
		if !res.IsError || !strings.Contains(res.Text, `the workspace "`+ws+`" no longer resolves to the directory pinned when the session started (another directory)`) {
			t.Fatalf("replaced workspace: %q", res.Text)
		}
	})
}

// No reach outside with the network denied: UDP to the host's 127.0.0.1, a pathname
// UNIX socket (inside the workspace, where the sandbox can see it), an abstract one, a
// host tmux server; only socketpair(2) works.
func TestConfinedNoReachOutside(t *testing.T) {
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	abstract := fmt.Sprintf("@dsh-sandbox-test-%d", os.Getpid())
	abs, err := net.Listen("unix", abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer abs.Close()
	forConfinedModes(t, stackSetup{}, func(t *testing.T, st *stack, s *container.Session, ws string) {
		sock := filepath.Join(ws, "agent.sock")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		for _, tc := range []struct{ op, arg, want string }{
			{"connect-unix", sock, "permission denied"},
			{"connect-unix", abstract, "permission denied"},
		} {
			if got := attackLine(t, st, s, tc.op, tc.arg); got != tc.want {
				t.Errorf("%s %s: %q, want %q", tc.op, tc.arg, got, tc.want)
			}
		}
		// UDP: the datagram goes to the sandbox's own loopback, never to the host's.
		attackLine(t, st, s, "udp", udp.LocalAddr().String())
		st.bash(t, s, "echo hi > /dev/udp/127.0.0.1/"+strconv.Itoa(udp.LocalAddr().(*net.UDPAddr).Port))
		if queued(t, udp.(*net.UDPConn)) { // loopback delivery is synchronous: anything sent is queued by now
			t.Fatal("a datagram got through")
		}
		for _, l := range []net.Listener{ln, abs} {
			if queued(t, l.(*net.UnixListener)) {
				t.Fatalf("a connection reached %v", l.Addr())
			}
		}
	})
}

// A host tmux server (its socket in the host's /tmp, or in the workspace) cannot be
// driven from a confined command: `tmux new-window 'touch …'` creates nothing, while the
// same request from outside does.
func TestConfinedNoTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	forConfinedModes(t, stackSetup{}, func(t *testing.T, st *stack, s *container.Session, ws string) {
		for _, sock := range []string{filepath.Join(canonTempDir(t), "tmux.sock"), filepath.Join(ws, "tmux.sock")} {
			tmux := func(args ...string) *exec.Cmd {
				cmd := exec.Command("tmux", append([]string{"-S", sock, "-f", "/dev/null"}, args...)...)
				cmd.Env = append(os.Environ(), "SHELL=/bin/sh") // nobody's login shell is nologin
				return cmd
			}
			if out, err := tmux("new-session", "-d", "-s", "dsh", "sleep 300").CombinedOutput(); err != nil {
				t.Fatalf("tmux: %v\n%s", err, out)
			}
			t.Cleanup(func() { tmux("kill-server").Run() })
			marker := filepath.Join(outsideTempDir(t, "dsh-sandbox-tmux-"), "pwned")
			res := st.bash(t, s, "tmux -S "+sock+" new-window -d 'touch "+marker+"'")
			if res.IsError || !strings.HasSuffix(res.Text, "[exit code: 1]") {
				t.Fatalf("tmux from the sandbox: %q", res.Text)
			}
			control := marker + "-control"
			if out, err := tmux("new-window", "-d", "touch "+control).CombinedOutput(); err != nil {
				t.Fatalf("tmux: %v\n%s", err, out)
			}
			waitFor(t, "the control window's file", func() bool { return exists(control) })
			if exists(marker) {
				t.Fatalf("the sandboxed tmux request ran (socket %s)", sock)
			}
		}
	})
}

// Other processes: dsh itself (this test process) is invisible — no /proc entry to read
// environ, mem or fd from, nothing to signal or trace — and a command of the same
// session is its own Landlock domain: visible, but not signalled, traced or read.
func TestConfinedOtherProcesses(t *testing.T) {
	forConfinedModes(t, stackSetup{}, func(t *testing.T, st *stack, s *container.Session, ws string) {
		self := strconv.Itoa(os.Getpid())
		for _, tc := range []struct{ op, arg, want string }{
			{"read", "/proc/" + self + "/environ", "no such file or directory"},
			{"read", "/proc/" + self + "/mem", "no such file or directory"},
			{"kill", self, "no such process"},
			{"ptrace", self, "no such process"},
			{"read", "/proc/1/environ", "permission denied"}, // the box
			{"kill", "1", "operation not permitted"},
			{"ptrace", "1", "operation not permitted"},
		} {
			if got := attackLine(t, st, s, tc.op, tc.arg); got != tc.want {
				t.Errorf("%s %s: %q, want %q", tc.op, tc.arg, got, tc.want)
			}
		}
		res := st.bash(t, s, "echo $$; exec sleep 300", "run_in_background", true)
		id := strings.TrimPrefix(res.Text, "started background job ")
		var pid string
		waitFor(t, "the job's pid", func() bool {
			out := st.call(t, s, "job_output", `{"job_id":"`+id+`"}`).Text
			pid, _, _ = strings.Cut(out, "\n")
			_, err := strconv.Atoi(pid)
			return err == nil
		})
		for _, tc := range []struct{ op, arg, want string }{
			{"kill", pid, "operation not permitted"},
			{"ptrace", pid, "operation not permitted"},
			{"read", "/proc/" + pid + "/environ", "permission denied"},
		} {
			if got := attackLine(t, st, s, tc.op, tc.arg); got != tc.want {
				t.Errorf("another command: %s %s: %q, want %q", tc.op, tc.arg, got, tc.want)
			}
		}
		// Inside one command's own tree, signals work; a signal death is not a denial.
		expect(t, st.bash(t, s, `sleep 60 & kill -TERM $! && wait $!; echo "child: $?"`), "child: 143\n", false)
		st.call(t, s, "job_kill", `{"job_id":"`+id+`"}`)
	})
}

// The approval prompt shows what it approves: an escalation whose command hides its
// head behind `\r\x1b[2K` reaches the user escaped, whole.
func TestApprovalPromptEscapesTheCommand(t *testing.T) {
	st := newStack(t, stackSetup{approval: "ask"})
	ws := workspace(t)
	p := &prompter{answer: container.Declined}
	s := &container.Session{ID: "escape", Cwd: ws, Prompter: p}
	res := st.bash(t, s, "rm -rf ~\r\x1b[2Kls", "sandbox_permissions", "workspace-write", "justification", "list\r\x1b[2Kfiles")
	expect(t, res, `Error: the user rejected escalating this command to "workspace-write"`, true)
	q := p.asked()
	if len(q) != 1 || !strings.Contains(q[0], "Command:\n  rm -rf ~\\r\\x1b[2Kls\n") || !strings.Contains(q[0], "Justification: list\\r\\x1b[2Kfiles\n") ||
		strings.ContainsAny(q[0], "\r\x1b") {
		t.Fatalf("the question: %q", q)
	}
}
