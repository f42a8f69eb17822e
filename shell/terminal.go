package shell

import (
	"context"
	"time"

	"github.com/dsh-dev/dsh/proc"
)

// Terminal is the pseudo-terminal a request asks to run its command under (see
// ExecRequest.Terminal): its size in character cells.
type Terminal = proc.Terminal

// The terminal a command gets when its request asks for one without a size, and the
// TERM it runs with.
const (
	DefaultTerminalCols = 120
	DefaultTerminalRows = 40
	TerminalTERM        = "xterm-256color"
)

// Terminals is implemented by executors that can run a command under a terminal
// (ExecRequest.Terminal). Callers offer terminals only when Terminals reports true;
// Resolve refuses a terminal request otherwise.
type Terminals interface {
	Terminals() bool
}

// Input is the input side of an execution started under a terminal: every execution
// of a spec with a Terminal implements it (a failed start's handle does not).
//
// What the terminal does with the input is the terminal's: in its default (canonical)
// mode it echoes what is typed into the output, a line reaches the command at "\r" or
// "\n", "\x03" (^C) sends SIGINT to the foreground process group, "\x1a" (^Z) SIGTSTP,
// and "\x04" (^D) at the start of a line is the end of input for the reader.
type Input interface {
	// WriteInput sends p to the terminal as if typed. It returns once the terminal took
	// all of p, or fails: ctx ended first, or the command has finished (an error
	// wrapping ErrInputClosed).
	WriteInput(ctx context.Context, p []byte) error
	// CloseInput ends the input as a terminal's user does: a ^D at the start of a line
	// (after one more that finishes the pending line, when the input written so far
	// does not end one). Later writes fail with ErrInputClosed.
	CloseInput(ctx context.Context) error
	// Resize changes the terminal's size; its foreground process group gets SIGWINCH.
	Resize(Terminal) error
	// WaitingForInput reports whether a process of the terminal's foreground process
	// group is blocked reading the terminal. known is false when the executor cannot
	// tell (a remote host): a caller then judges by the output — quiet, and not ending
	// in a newline.
	WaitingForInput() (waiting, known bool)
}

// ErrInputClosed: the execution takes no more input (its command finished, or its input
// was closed).
var ErrInputClosed = proc.ErrInputClosed

// Activity is implemented by executions that tell how their output advances: every
// execution of package bashexec.
type Activity interface {
	// OutputBytes is how much output the command has produced so far (both streams).
	OutputBytes() int64
	// LastOutput is when the command last produced output (the zero time before it did).
	LastOutput() time.Time
	// Tail returns up to the last n bytes of the stream that last received output,
	// without consuming anything (for progress reports: the last line so far).
	Tail(n int) []byte
}

// Detacher is implemented by executions a caller may hand over so that they outlive its
// call (every execution of package bashexec): the bash tool hands a foreground command
// that waits for input, or outlives its timeout, to the jobs runtime.
type Detacher interface {
	// Detach frees the command from Execute's context and from its deadline: from now
	// on it runs until it ends by itself, Kill, or its service's disposal. It reports
	// false when that is too late — the command finished, or is being killed (its
	// deadline or the context came first).
	Detach() bool
}
