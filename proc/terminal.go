package proc

import (
	"errors"
	"fmt"
	"os"
)

// Terminal is the pseudo-terminal a command runs under: its size in character cells. A
// command under a terminal has the terminal's slave side as its stdin, stdout and stderr
// and as the controlling terminal of the session it leads, so its output is one stream;
// the service that runs it holds the master side, reads the output from it and writes
// the input to it.
type Terminal struct {
	// Cols and Rows are the terminal's width and height (1 to MaxTerminalCells each).
	Cols, Rows int
}

// MaxTerminalCells is the largest width or height of a terminal (the kernel's winsize
// holds 16 bits).
const MaxTerminalCells = 65535

// Check reports a size out of range: "cols and rows must be between 1 and 65535, got
// <cols>x<rows>".
func (t Terminal) Check() error {
	if t.Cols < 1 || t.Cols > MaxTerminalCells || t.Rows < 1 || t.Rows > MaxTerminalCells {
		return fmt.Errorf("cols and rows must be between 1 and %d, got %dx%d", MaxTerminalCells, t.Cols, t.Rows)
	}
	return nil
}

// TerminalStarted is the Started of a Starter that allocated the leader's terminal
// (StartRequest.Terminal) where the leader lives: a box takes it from its own devpts,
// so that a confined command's terminal is one of the box's. Master hands the master
// side to the Supervisor, which from then on owns it (reads the output, writes the
// input, closes it); it is called once, right after Start.
type TerminalStarted interface {
	Started
	Master() *os.File
}

// ErrInputClosed: a process takes no more input — it finished, or its input was closed.
var ErrInputClosed = errors.New("the command takes no more input")

// EndOfInput is what ends a terminal's input, as its user would, after input whose
// last byte was last (0 when nothing was written): a ^D at the start of a line — after
// one more ^D that finishes the pending line when the input so far does not end one (a
// line cut by ^C, ^U, ^\ or ^Z ends there too).
func EndOfInput(last byte) []byte {
	switch last {
	case 0, '\n', '\r', ctrlD, 0x03, 0x15, 0x1c, 0x1a:
		return []byte{ctrlD}
	}
	return []byte{ctrlD, ctrlD}
}

// ctrlD is the end-of-file character of a terminal's default modes.
const ctrlD = 0x04
