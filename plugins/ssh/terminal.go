package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	xssh "golang.org/x/crypto/ssh"

	"github.com/dsh-dev/dsh/proc"
)

// A command started with Spec.Terminal runs under a remote pseudo-terminal: its channel
// asks sshd for one (pty-req, with TERM and the size) before the exec request, so the
// command's stdin, stdout and stderr are that terminal and its output arrives on the
// channel's stdout alone. The input is written to the channel; its end is the
// terminal's (^D at a line start), then the channel's own (EOF); a resize is a
// window-change request. Whether the command waits for input cannot be read from here:
// WaitingForInput is unknown, and callers judge by the output.

// terminal is the input side of a remote terminal.
type terminal struct {
	mu     sync.Mutex // orders the writes
	last   byte       // the last byte written, 0 before the first
	closed bool       // CloseInput ran
}

// ptyRequest is the payload of a pty-req channel request (RFC 4254, 6.2).
type ptyRequest struct {
	Term                   string
	Columns, Rows          uint32
	WidthPixels, HeightPix uint32
	Modes                  string
}

// windowChange is the payload of a window-change channel request (RFC 4254, 6.7).
type windowChange struct {
	Columns, Rows          uint32
	WidthPixels, HeightPix uint32
}

// terminalTERM is the TERM the remote terminal is asked for (and the command's; the
// executor core exports it too).
const terminalTERM = "xterm-256color"

// requestTerminal asks sshd for a terminal of size t on the command's channel.
func (p *Process) requestTerminal(t proc.Terminal) error {
	ok, err := p.ch.SendRequest("pty-req", true, xssh.Marshal(ptyRequest{
		Term: terminalTERM, Columns: uint32(t.Cols), Rows: uint32(t.Rows),
		Modes: "\x00", // TTY_OP_END: the server's default modes
	}))
	switch {
	case err != nil:
		return err
	case !ok:
		return errors.New("the server refused a terminal (pty-req)")
	}
	return nil
}

// WriteInput writes b to the command's terminal, as if typed. It returns once the
// channel took all of it, or fails: ctx ended first (the write then still goes on, in
// order, in the background), or the command takes no more input (proc.ErrInputClosed).
func (p *Process) WriteInput(ctx context.Context, b []byte) error {
	t := p.tty
	if t == nil {
		return errors.New("ssh: the command has no terminal")
	}
	return p.inputWrite(ctx, func() ([]byte, error) {
		if t.closed {
			return nil, proc.ErrInputClosed
		}
		return b, nil
	}, false)
}

// CloseInput ends the terminal's input as its user would (proc.EndOfInput), then the
// channel's input. Later writes fail with proc.ErrInputClosed.
func (p *Process) CloseInput(ctx context.Context) error {
	t := p.tty
	if t == nil {
		return errors.New("ssh: the command has no terminal")
	}
	err := p.inputWrite(ctx, func() ([]byte, error) {
		if t.closed {
			return nil, errAlreadyClosed
		}
		return proc.EndOfInput(t.last), nil
	}, true)
	if errors.Is(err, errAlreadyClosed) || errors.Is(err, proc.ErrInputClosed) {
		return nil
	}
	return err
}

var errAlreadyClosed = errors.New("the input is closed already")

// inputWrite writes what next returns (under the terminal's lock, in order) in a
// goroutine, and waits for it or for ctx. With end, the input is closed after it.
func (p *Process) inputWrite(ctx context.Context, next func() ([]byte, error), end bool) error {
	t := p.tty
	done := make(chan error, 1)
	go func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		b, err := next()
		if err == nil {
			err = p.write(b)
		}
		if err == nil && end {
			t.closed = true
			_ = p.ch.CloseWrite()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("writing to the terminal: %w", context.Cause(ctx))
	}
}

// write sends b on the channel, under the terminal's lock.
func (p *Process) write(b []byte) error {
	if p.tear.State() != proc.Running {
		return proc.ErrInputClosed
	}
	n, err := p.ch.Write(b)
	if n > 0 {
		p.tty.last = b[n-1]
	}
	if err != nil {
		if p.tear.State() != proc.Running || errors.Is(err, io.EOF) {
			return proc.ErrInputClosed
		}
		return fmt.Errorf("writing to the terminal: %w", err)
	}
	return nil
}

// Resize asks sshd to change the terminal's size (window-change).
func (p *Process) Resize(size proc.Terminal) error {
	if p.tty == nil {
		return errors.New("ssh: the command has no terminal")
	}
	if err := size.Check(); err != nil {
		return fmt.Errorf("ssh: invalid terminal: %w", err)
	}
	_, err := p.ch.SendRequest("window-change", false, xssh.Marshal(windowChange{Columns: uint32(size.Cols), Rows: uint32(size.Rows)}))
	return err
}

// WaitingForInput is unknown for a remote command: nothing here sees its processes.
func (p *Process) WaitingForInput() (waiting, known bool) { return false, false }

// Detach takes back the deadline and the context of Start: from now on only Kill (or
// the Host's Close, or a lost connection) ends the command. False once it is being
// killed or has exited.
func (p *Process) Detach() bool { return p.tear.Disarm() }
