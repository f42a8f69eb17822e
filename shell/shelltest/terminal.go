package shelltest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/shell"
)

// terminals reports whether the target's executors run commands under a terminal.
func (k *kit) terminals(t *testing.T) bool {
	t.Helper()
	ex, _, _ := k.target.Executor(t, nil)
	ts, ok := ex.(shell.Terminals)
	return ok && ts.Terminals()
}

// tty starts command under a default terminal and returns its execution and input.
func (e *env) tty(command string) (shell.Execution, shell.Input) {
	e.t.Helper()
	x := e.start(context.Background(), shell.ExecRequest{Command: command, Terminal: &shell.Terminal{}, Expiry: shell.ExpiryNone})
	in, ok := x.(shell.Input)
	if !ok {
		e.t.Fatalf("the execution of %q under a terminal is no shell.Input", command)
	}
	return x, in
}

// write sends s to the terminal, bounded by a deadline.
func write(t *testing.T, in shell.Input, s string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := in.WriteInput(ctx, []byte(s)); err != nil {
		t.Fatalf("WriteInput(%q): %v", s, err)
	}
}

// readRaw collects ReadOutput deltas until what was read contains want.
func readRaw(t *testing.T, x shell.Execution, got *strings.Builder, want string) {
	t.Helper()
	if !proctest.Until(20*time.Second, func() bool {
		got.WriteString(x.ReadOutput().Delta)
		return strings.Contains(got.String(), want)
	}) {
		t.Fatalf("terminal output %q; waited for %q", got.String(), want)
	}
}

// A command under a terminal: the terminal is its stdin and its one output stream,
// TERM and the size are the terminal's; a prompt is read and answered (and, where the
// executor can tell, the foreground process is seen waiting for it); ^C ends a sleep
// by SIGINT; ^D at a line start, and CloseInput, end a reader's input; a finished
// command takes no input.
func (k *kit) terminal(t *testing.T) {
	if !k.terminals(t) {
		t.Skip("the executor runs no terminals")
	}
	e := k.env(t, nil)
	t.Run("prompt", func(t *testing.T) {
		x, in := e.tty(`echo "$TERM $(stty size)"; [ -t 0 ] && echo on-tty; echo err >&2; read -p "Name: " n; echo "hi $n"`)
		var got strings.Builder
		readRaw(t, x, &got, "Name: ")
		if waiting, known := in.WaitingForInput(); known && !waiting {
			if !proctest.Until(20*time.Second, func() bool { w, _ := in.WaitingForInput(); return w }) {
				t.Error("the prompt's reader is not seen waiting for input")
			}
		}
		write(t, in, "Ada\n")
		done(t, x, 20*time.Second)
		got.WriteString(x.ReadOutput().Delta)
		if want := "xterm-256color 40 120\r\non-tty\r\nerr\r\nName: Ada\r\nhi Ada\r\n"; got.String() != want {
			t.Errorf("terminal output %q, want %q", got.String(), want)
		}
		res, err := x.Result(context.Background())
		if err != nil || code(res) != "0" || res.Stderr.Text != "" || !strings.HasSuffix(res.Stdout.Text, "hi Ada\r\n") {
			t.Errorf("result %+v, %v", res, err)
		}
		if _, known := in.WaitingForInput(); known {
			t.Error("a finished command's terminal says whether it waits")
		}
		if err := in.WriteInput(context.Background(), []byte("late\n")); !errors.Is(err, shell.ErrInputClosed) {
			t.Errorf("a write to a finished command: %v; want ErrInputClosed", err)
		}
	})
	t.Run("interrupt", func(t *testing.T) {
		x, in := e.tty("echo ready; sleep 100")
		var got strings.Builder
		readRaw(t, x, &got, "ready\r\n")
		if w, known := in.WaitingForInput(); known && w {
			t.Error("a sleeping command is seen waiting for input")
		}
		write(t, in, "\x03")
		done(t, x, 20*time.Second)
		if res, err := x.Result(context.Background()); err != nil || res.Signal != "SIGINT" || res.TimedOut || res.Aborted {
			t.Errorf("after ^C: %+v, %v; want SIGINT and neither flag", res, err)
		}
	})
	t.Run("end of input", func(t *testing.T) {
		x, in := e.tty(`while read -r l; do echo "got $l"; done; echo bye`)
		var got strings.Builder
		write(t, in, "one\n")
		readRaw(t, x, &got, "got one\r\n")
		write(t, in, "\x04")
		done(t, x, 20*time.Second)
		got.WriteString(x.ReadOutput().Delta)
		if !strings.HasSuffix(got.String(), "bye\r\n") {
			t.Errorf("after ^D: %q", got.String())
		}

		x, in = e.tty(`cat; echo "cat ended"`)
		got.Reset()
		write(t, in, "half")
		readRaw(t, x, &got, "half")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := in.CloseInput(ctx); err != nil {
			t.Fatal(err)
		}
		done(t, x, 20*time.Second)
		got.WriteString(x.ReadOutput().Delta)
		if !strings.HasSuffix(got.String(), "halfhalfcat ended\r\n") {
			t.Errorf("after CloseInput with a pending line: %q", got.String())
		}
		if err := in.WriteInput(ctx, []byte("x")); !errors.Is(err, shell.ErrInputClosed) {
			t.Errorf("a write after CloseInput: %v", err)
		}
	})
}

// A command can be handed over: a hand-over spec runs past its timeout, and Detach
// frees a command from the deadline and the context of its call; output read before
// stays read.
func (k *kit) handOver(t *testing.T) {
	e := k.env(t, nil)
	gate, open := e.gate("gate")
	spec := e.spec(shell.ExecRequest{Command: "echo one; while [ ! -e " + proctest.Quote(gate) + " ]; do sleep 0.01; done; echo two",
		Expiry: shell.ExpiryHandOver, TimeoutMs: f64(200)})
	if spec.TimeoutMs != 200 {
		t.Errorf("hand-over spec: TimeoutMs %d", spec.TimeoutMs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	x, err := e.ex.Execute(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	first := readUntil(t, x, "one\n")
	d, ok := x.(shell.Detacher)
	if !ok {
		t.Fatal("the execution is no shell.Detacher")
	}
	if _, ok := x.(shell.Activity); !ok {
		t.Error("the execution is no shell.Activity")
	}
	select {
	case <-x.Done():
		t.Fatal("a hand-over command ended at its timeout")
	case <-time.After(400 * time.Millisecond):
	}
	if !d.Detach() {
		t.Fatal("Detach of a running command")
	}
	cancel()
	open()
	done(t, x, 20*time.Second)
	if rest := x.ReadOutput().Delta; first+rest != "one\ntwo\n" {
		t.Errorf("reads across the hand-over: %q then %q", first, rest)
	}
	res, err := x.Result(context.Background())
	if err != nil || code(res) != "0" || res.Aborted || res.TimedOut || res.TimeoutMs != 200 {
		t.Errorf("result %+v, %v", res, err)
	}
	if d.Detach() {
		t.Error("Detach of a finished command")
	}
}
