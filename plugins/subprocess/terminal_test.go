package subprocess_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
)

func ttySpec(script string) subprocess.Spec {
	spec := bashSpec(script)
	spec.Terminal = &proc.Terminal{Cols: 120, Rows: 40}
	return spec
}

// writeInput writes s to p's terminal, bounded by a deadline.
func writeInput(t *testing.T, p *subprocess.Process, s string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.WriteInput(ctx, []byte(s)); err != nil {
		t.Fatalf("WriteInput(%q): %v", s, err)
	}
}

// awaitWaiting waits until p's foreground process blocks reading the terminal.
func awaitWaiting(t *testing.T, p *subprocess.Process) {
	t.Helper()
	proctest.WaitFor(t, 10*time.Second, "the command to wait for input", func() bool {
		w, known := p.WaitingForInput()
		return w && known
	})
}

// A command under a terminal: the terminal is its controlling terminal, stdin, stdout
// and stderr (one stream), sized as asked, with TERM left to the caller; a prompt waits
// for its answer, which the terminal echoes.
func TestTerminal(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		before := proctest.FDs(t)
		p := spawn(t, sup, ttySpec(`stat=$(cat /proc/$$/stat); set -- ${stat##*) }; echo "tty_nr=$5 sid=$4 pid=$$"; `+
			`stty size; [ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo all-terminal; echo to-stderr >&2; `+
			`echo via-dev-tty >/dev/tty; read -p "Name: " n; echo "hi $n"`))
		awaitWaiting(t, p)
		if got := p.Stdout().Output().Text; !strings.HasSuffix(got, "Name: ") {
			t.Fatalf("before the answer: %q", got)
		}
		writeInput(t, p, "Ada\n")
		ex := proctest.AwaitExit(t, p, 10*time.Second)
		out := p.Stdout().Output().Text
		pid := strconv.Itoa(p.Pid())
		for _, want := range []string{"sid=" + pid + " pid=" + pid, "40 120\r\n", "all-terminal\r\n", "to-stderr\r\n",
			"via-dev-tty\r\n", "Name: Ada\r\nhi Ada\r\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%q", want, out)
			}
		}
		if strings.Contains(out, "tty_nr=0 ") {
			t.Errorf("no controlling terminal: %q", out)
		}
		if proctest.Code(ex) != 0 || p.Stderr().Output().Text != "" {
			t.Errorf("exit %v, stderr %q", ex, p.Stderr().Output().Text)
		}
		if err := p.WriteInput(context.Background(), []byte("late\n")); !errors.Is(err, proc.ErrInputClosed) {
			t.Errorf("a write after the exit: %v", err)
		}
		<-p.Done()
		if !proctest.Until(10*time.Second, func() bool { return len(terminalFDs(t, before)) == 0 }) {
			t.Errorf("terminal descriptors left open: %v", terminalFDs(t, before))
		}
	})
}

// ^C in the input ends the foreground process by SIGINT; ^D at a line start (and
// CloseInput) ends a reader's input.
func TestTerminalControlKeys(t *testing.T) {
	sup := newSup(t, false)
	proctest.NoLeftovers(t)
	p := spawn(t, sup, ttySpec("exec sleep 100"))
	awaitFor(t, p, "sleep to be exec'd", func() bool { return strings.Contains(comm(p.Pid()), "sleep") })
	writeInput(t, p, "\x03")
	if ex := proctest.AwaitExit(t, p, 10*time.Second); ex.Signal != "SIGINT" || ex.Reason != proc.ReasonNone {
		t.Errorf("after ^C: %+v", ex)
	}

	p = spawn(t, sup, ttySpec("cat; echo end"))
	awaitWaiting(t, p)
	writeInput(t, p, "partial")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.CloseInput(ctx); err != nil {
		t.Fatal(err)
	}
	if ex := proctest.AwaitExit(t, p, 10*time.Second); proctest.Code(ex) != 0 {
		t.Errorf("cat after CloseInput: %+v", ex)
	}
	if out := p.Stdout().Output().Text; !strings.Contains(out, "partialpartial") || !strings.HasSuffix(out, "end\r\n") {
		t.Errorf("cat's output %q: want the line echoed, then cat's copy, then end", out)
	}
	if err := p.WriteInput(ctx, []byte("x")); !errors.Is(err, proc.ErrInputClosed) {
		t.Errorf("a write after CloseInput: %v", err)
	}
}

// Resize changes the size the command sees, with SIGWINCH.
func TestTerminalResize(t *testing.T) {
	sup := newSup(t, false)
	proctest.NoLeftovers(t)
	p := spawn(t, sup, ttySpec(`trap 'stty size' WINCH; echo ready; while :; do read -t 0.05 x && break; done`))
	waitOutput(t, p, "ready")
	if err := p.Resize(proc.Terminal{Cols: 100, Rows: 30}); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, p, "30 100")
	p.Kill()
	<-p.Done()
}

// Waiting for input is told apart from sleeping, from reading a pipe, and from output.
func TestTerminalWaitingForInput(t *testing.T) {
	sup := newSup(t, false)
	proctest.NoLeftovers(t)
	for _, c := range []struct {
		script string
		want   bool
	}{
		{"read x", true},
		{"python3 -c 'import select,sys; select.select([sys.stdin],[],[])'", true},
		{"python3 -c 'import select,sys; p=select.poll(); p.register(0, select.POLLIN); p.poll()'", true},
		{"python3 -c 'import select; e=select.epoll(); e.register(0, select.EPOLLIN); e.poll()'", true},
		{"sleep 100", false},
		{"sleep 100 | cat", false},
		{"python3 -c 'import select,os; r,w=os.pipe(); select.select([r],[],[])'", false},
	} {
		p := spawn(t, sup, ttySpec("echo started; "+c.script))
		waitOutput(t, p, "started")
		if c.want {
			awaitWaiting(t, p)
		} else {
			// Give it the time to block where it blocks, then look.
			awaitFor(t, p, "the command to block", func() bool { return blockedIn(t, p) })
			if w, known := p.WaitingForInput(); w || !known {
				t.Errorf("%s: waiting %v known %v", c.script, w, known)
			}
		}
		p.Kill()
		<-p.Done()
	}
}

// awaitFor waits for cond while p runs.
func awaitFor(t *testing.T, p *subprocess.Process, what string, cond func() bool) {
	t.Helper()
	proctest.WaitFor(t, 10*time.Second, what, cond)
}

// blockedIn reports whether the processes of p's group all sleep, bash among them only
// once it started what it runs.
func blockedIn(t *testing.T, p *subprocess.Process) bool {
	t.Helper()
	n := 0
	for _, pr := range proctest.Processes() {
		if pr.Pgid != p.Pid() || pr.State == 'Z' {
			continue
		}
		n++
		if pr.State != 'S' {
			return false
		}
	}
	return n > 1 || n == 1 && comm(p.Pid()) != "bash"
}

func comm(pid int) string {
	st, err := proctest.Stat(pid)
	if err != nil {
		return ""
	}
	return st.Comm
}

// terminalFDs lists the descriptors of a pty master or slave this process has opened
// since before.
func terminalFDs(t *testing.T, before map[string]string) []string {
	var out []string
	for _, fd := range proctest.NewFDs(before, proctest.FDs(t)) {
		if strings.Contains(fd, "/dev/ptmx") || strings.Contains(fd, "/dev/pts/") {
			out = append(out, fd)
		}
	}
	return out
}

// The drain bound holds under a terminal too: something the leader left holding the
// terminal (it ignores the hang-up) cannot keep the process from settling.
func TestTerminalDrainBound(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		p := spawn(t, sup, ttySpec(`(trap '' HUP; exec sleep 100) & echo started`))
		ex := proctest.AwaitExit(t, p, 10*time.Second)
		if proctest.Code(ex) != 0 || p.Stdout().Output().Text != "started\r\n" {
			t.Errorf("exit %+v, output %q", ex, p.Stdout().Output().Text)
		}
	})
}
