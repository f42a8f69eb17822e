package bashsandbox_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/internal/proctest"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/shell"
	"github.com/dsh-dev/dsh/shell/bashexec"
)

// sandboxExecutor is a bash-sandbox executor in workspace-write mode, its workspace a
// fresh directory, with or without namespaces.
func sandboxExecutor(t *testing.T, namespaces string) (shell.Executor, string) {
	t.Helper()
	sup := subprocess.New(subprocess.Options{SpillRoot: t.TempDir(), Logger: quietLogger()})
	t.Cleanup(sup.Close)
	ws := workspace(t)
	c := bashsandbox.DefaultConfig()
	c.Config = bashexec.DefaultConfig()
	c.Cwd, c.GraceMs, c.DefaultMode, c.Namespaces = ws, 500, shell.ModeWorkspaceWrite, namespaces
	ex, _, err := bashsandbox.New(sup, c, quietLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return ex, ws
}

// runTTY runs command under a terminal to its end and returns its output.
func runTTY(t *testing.T, ex shell.Executor, command string) string {
	t.Helper()
	spec, err := ex.Resolve(shell.ExecRequest{Command: command, Terminal: &shell.Terminal{}})
	if err != nil {
		t.Fatal(err)
	}
	x, err := ex.Execute(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	res, err := x.Result(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res.Stdout.Text + res.Stderr.Text
}

// hostTerminal opens a terminal of this host (as a user's would be) and returns its
// slave's path and a function that reports what was typed into it, if anything.
func hostTerminal(t *testing.T) (path string, typed func() string) {
	t.Helper()
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no host terminal: %v", err)
	}
	t.Cleanup(func() { unix.Close(m) })
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(m, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	path = "/dev/pts/" + strconv.Itoa(int(n))
	s, err := unix.Open(path, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(s) })
	// Raw: whatever lands in its input queue is readable at once, newline or not.
	tio, err := unix.IoctlGetTermios(s, unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Lflag &^= unix.ICANON | unix.ECHO
	if err := unix.IoctlSetTermios(s, unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	return path, func() string {
		buf := make([]byte, 256)
		k, _ := unix.Read(s, buf)
		return string(buf[:max(k, 0)])
	}
}

// A confined command's terminal is the box's: the /dev/pts it sees holds its own
// terminal only (in the namespaces), /dev/tty is that terminal (and nothing for a
// command without one), and no terminal can be typed into (TIOCSTI fails with EPERM),
// neither a host terminal the command opens by name nor its own.
func TestConfinedTerminalIsTheBoxs(t *testing.T) {
	for _, ns := range []string{bashsandbox.NamespacesAuto, bashsandbox.NamespacesOff} {
		t.Run("namespaces "+ns, func(t *testing.T) {
			noProcessLeft(t)
			ex, _ := sandboxExecutor(t, ns)
			host, typed := hostTerminal(t)
			out := runTTY(t, ex, `tty; ls /dev/pts | tr '\n' ' '; echo; echo via-tty > /dev/tty && echo wrote-tty`)
			lines := strings.Split(out, "\r\n")
			if ns == bashsandbox.NamespacesAuto && (len(lines) < 3 || lines[0] != "/dev/pts/0" || lines[1] != "0 ptmx ") {
				t.Errorf("the box's devpts: %q", out)
			}
			if !strings.Contains(out, "via-tty\r\nwrote-tty\r\n") {
				t.Errorf("/dev/tty under a terminal: %q", out)
			}
			spec, _ := ex.Resolve(shell.ExecRequest{Command: "echo x > /dev/tty"})
			x, _ := ex.Execute(context.Background(), spec)
			if res, _ := x.Result(context.Background()); res.ExitCode == nil || *res.ExitCode == 0 || !strings.Contains(res.Stderr.Text, "No such device or address") {
				t.Errorf("/dev/tty without a terminal: %+v", res)
			}

			// TIOCSTI into the host terminal, by its name, and into the command's own.
			py := `import fcntl, termios, sys
def sti(f, what):
    try:
        fd = open(f, "rb", buffering=0) if isinstance(f, str) else f
        for c in b"id\n": fcntl.ioctl(fd, termios.TIOCSTI, bytes([c]))
        print(what, "injected")
    except OSError as e:
        print(what, e.strerror)
sti(` + strconv.Quote(host) + `, "host")
sti(sys.stdin, "own")
`
			out = runTTY(t, ex, "python3 -c "+proctest.Quote(py))
			if strings.Contains(out, "injected") || !strings.Contains(out, "own Operation not permitted") {
				t.Errorf("TIOCSTI: %q", out)
			}
			if got := typed(); got != "" {
				t.Errorf("the host terminal got %q typed into it", got)
			}
		})
	}
}

// The foreground process of a confined command's terminal is seen waiting for input
// from the host, through the box's PID namespace.
func TestConfinedTerminalWaitingForInput(t *testing.T) {
	noProcessLeft(t)
	ex, _ := sandboxExecutor(t, bashsandbox.NamespacesAuto)
	spec, _ := ex.Resolve(shell.ExecRequest{Command: `sleep 0.2; read -p "Name: " n; echo "hi $n"`, Terminal: &shell.Terminal{}})
	x, err := ex.Execute(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	in := x.(shell.Input)
	if w, known := in.WaitingForInput(); w || !known {
		t.Errorf("while sleeping: waiting %v known %v", w, known)
	}
	waitFor(t, "the prompt to wait for input", func() bool { w, _ := in.WaitingForInput(); return w })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := in.WriteInput(ctx, []byte("Ada\n")); err != nil {
		t.Fatal(err)
	}
	res, _ := x.Result(context.Background())
	if !strings.HasSuffix(res.Stdout.Text, "Name: Ada\r\nhi Ada\r\n") {
		t.Errorf("output %q", res.Stdout.Text)
	}
}

// Under a terminal the command's stderr is the terminal: a write the sandbox refused is
// a denial there too (docs/sandbox.md, docs/interactive.md), so the model gets the denial marker and its
// escalation hint; a failure that is not the sandbox's is not.
func TestConfinedTerminalDenial(t *testing.T) {
	ex, _ := sandboxExecutor(t, "auto")
	for command, denied := range map[string]bool{
		"touch /etc/dsh-denied-under-tty": true,
		"echo 'Read-only file system'":    false, // exit 0
		"echo nothing denied; exit 3":     false,
	} {
		spec, err := ex.Resolve(shell.ExecRequest{Command: command, Terminal: &shell.Terminal{}})
		if err != nil {
			t.Fatal(err)
		}
		x, err := ex.Execute(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		res, err := x.Result(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if res.Sandbox == nil || res.Sandbox.Denied != denied || res.Sandbox.RunnerFailed {
			t.Errorf("%q: sandbox facts %+v (output %q), want denied %v", command, res.Sandbox, res.Stdout.Text, denied)
		}
	}
}
