//go:build linux

package launch

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testBox is a box started from this test binary (whose init dispatches
// BoxArg like dsh's), and the dsh end of its control socket.
type testBox struct {
	cmd  *exec.Cmd
	conn *Conn
}

func startBox(t *testing.T, setup Setup, ws *os.File) *testBox {
	t.Helper()
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	theirs := os.NewFile(uintptr(pair[1]), "control")
	cmd := exec.Command(os.Args[0], BoxArg)
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.Stderr = os.Stderr
	if setup.Namespaces {
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}},
			AmbientCaps: []uintptr{8, 12, 21, 24},
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	theirs.Close()
	conn, err := NewConn(pair[0])
	if err != nil {
		t.Fatal(err)
	}
	sb := &testBox{cmd: cmd, conn: conn}
	t.Cleanup(func() {
		conn.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Error("the sandbox did not exit when its connection closed")
		}
	})
	var fds []int
	if ws != nil {
		fds = append(fds, int(ws.Fd()))
	}
	if err := conn.Send(setup.Encode(), fds...); err != nil {
		t.Fatal(err)
	}
	if r := sb.reply(t); r.Type != MsgReady {
		t.Skipf("this host cannot build the sandbox: %+v", r)
	}
	return sb
}

func (sb *testBox) reply(t *testing.T) Reply {
	t.Helper()
	p, fds, err := sb.conn.Recv()
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		syscall.Close(fd)
	}
	r, err := DecodeReply(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// run starts argv with the given policy and returns the first answer, and for a started
// command its exit (after which it is released) and its stderr.
func (sb *testBox) run(t *testing.T, id uint64, p Policy, dir string, argv ...string) (Reply, Reply, string) {
	t.Helper()
	path := argv[0]
	if !strings.Contains(path, "/") {
		if lp, err := exec.LookPath(path); err == nil {
			path = lp
		}
	}
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	r, w, _ := os.Pipe()
	defer r.Close()
	m := Start{ID: id, Policy: p, Path: path, Argv: argv, Dir: dir, Env: []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}}
	err := sb.conn.Send(m.Encode(), int(devnull.Fd()), int(w.Fd()), int(w.Fd()))
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	first := sb.reply(t)
	if first.Type != MsgStarted {
		return first, Reply{}, ""
	}
	exit := sb.reply(t)
	if err := sb.conn.Send(Release{ID: id}.Encode()); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 4096)
	n, _ := r.Read(out)
	return first, exit, string(out[:n])
}

// The protocol against a real box: exits are reported with their status; a program
// or directory that does not exist fails the start with its errno; a command the box
// cannot confine is the launcher's failure mode's one line and exit 125, never the command.
func TestBox(t *testing.T) {
	for _, ns := range []bool{false, true} {
		name := "landlock only"
		if ns {
			name = "namespaces"
		}
		t.Run(name, func(t *testing.T) {
			base, _ := filepath.EvalSymlinks(t.TempDir())
			for _, d := range []string{"tmp", "stage", "ws"} {
				os.Mkdir(filepath.Join(base, d), 0o700)
			}
			ws := filepath.Join(base, "ws")
			wsf, err := os.Open(ws)
			if err != nil {
				t.Fatal(err)
			}
			defer wsf.Close()
			sb := startBox(t, Setup{Namespaces: ns, Network: NetworkDeny, Workspace: ws,
				TempDir: filepath.Join(base, "tmp"), Stage: filepath.Join(base, "stage")}, wsf)
			ro := Policy{Mode: ModeReadOnly, Network: NetworkDeny}

			first, exit, _ := sb.run(t, 1, ro, ws, "bash", "-c", "exit 7")
			if first.Type != MsgStarted || first.Pid <= 0 || first.LaunchFailed || exit.Type != MsgExited || exit.ID != 1 || exit.Code != 7 || exit.Signal != 0 {
				t.Fatalf("exit 7: %+v, %+v", first, exit)
			}
			_, exit, _ = sb.run(t, 2, ro, ws, "bash", "-c", "kill -TERM $$")
			if exit.Code != 0 || exit.Signal != int(syscall.SIGTERM) {
				t.Fatalf("killed by SIGTERM: %+v", exit)
			}
			first, _, _ = sb.run(t, 3, ro, ws, "/nonexistent/program")
			if first.Type != MsgFailed || first.Errno != int(syscall.ENOENT) || first.Op != "exec" || first.Path != "/nonexistent/program" {
				t.Fatalf("missing program: %+v", first)
			}
			first, _, _ = sb.run(t, 4, ro, filepath.Join(ws, "gone"), "bash", "-c", "true")
			if first.Type != MsgFailed || first.Errno != int(syscall.ENOENT) || first.Op != "chdir" || first.Path != filepath.Join(ws, "gone") {
				t.Fatalf("missing directory: %+v", first)
			}
			marker := filepath.Join(ws, "marker")
			bad := Policy{Mode: ModeWorkspaceWrite, WorkspaceRoot: filepath.Join(base, "nowhere"), Network: NetworkDeny}
			first, exit, stderr := sb.run(t, 5, bad, ws, "bash", "-c", "touch "+marker)
			if first.Type != MsgStarted || !first.LaunchFailed || exit.Code != LauncherFailureExitCode ||
				!strings.HasPrefix(stderr, LauncherFailurePrefix+"confine the command: landlock: "+filepath.Join(base, "nowhere")+": no such file or directory") ||
				strings.Count(stderr, "\n") != 1 {
				t.Fatalf("unconfinable command: %+v, %+v, stderr %q", first, exit, stderr)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the command ran although it could not be confined")
			}
			first, _, _ = sb.run(t, 6, Policy{Mode: ModeReadOnly, Network: NetworkAllow}, ws, "true")
			if first.Type != MsgFailed || !strings.Contains(first.Message, `network policy "allow" is not the sandbox's "deny"`) {
				t.Fatalf("another network policy: %+v", first)
			}
		})
	}
}
