package subprocess

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/proc"
)

// A command spawned with Spec.Terminal runs under a pseudo-terminal: the Supervisor (or,
// for a tree a Starter starts, the Starter) allocates it, the leader gets its slave side
// as stdin, stdout, stderr and controlling terminal of the session it leads, and the
// Supervisor keeps the master side. The output is read from the master into Stdout
// (Stderr stays empty); the input is written to it. The slave side is closed here as
// soon as the leader has it, so the master reads EOF (EIO) once nothing of the tree
// holds the terminal any more, just as an output pipe would; the drain bound cuts the
// read otherwise. Teardown is unchanged: signals go to the group and the cgroup.

// terminal is the master side of a process's terminal.
type terminal struct {
	master *os.File // also the process's rOut: the output is read from it
	// rdev is the slave's device number, by which a process's descriptor is known to be
	// this terminal (WaitingForInput).
	rdev uint64

	mu     sync.Mutex // serialises the writes, in order
	last   byte       // the last byte written, 0 before the first
	closed bool       // CloseInput ran
}

// ptySlaveMajor is the major device number of Unix98 pty slaves (the minor is the
// terminal's index in its devpts instance).
const ptySlaveMajor = 136

// openTerminal allocates a pseudo-terminal of size t from /dev/ptmx: the master, in
// non-blocking mode (so that reads park on the runtime's poller and a deadline can cut
// them), and the slave. Neither becomes anybody's controlling terminal here
// (O_NOCTTY), and both are closed on exec.
func openTerminal(t proc.Terminal) (master, slave *os.File, err error) {
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, &proc.SpawnError{Op: "open", Path: "/dev/ptmx", Err: err}
	}
	sfd, err := setUpMaster(mfd, t)
	if err != nil {
		unix.Close(mfd)
		return nil, nil, &proc.SpawnError{Op: "terminal", Err: err}
	}
	return os.NewFile(uintptr(mfd), "ptmx"), os.NewFile(uintptr(sfd), "pts"), nil
}

// setUpMaster unlocks the master mfd, sets its size and opens its slave.
func setUpMaster(mfd int, t proc.Terminal) (int, error) {
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		return -1, fmt.Errorf("unlock the terminal: %w", err)
	}
	if err := unix.IoctlSetWinsize(mfd, unix.TIOCSWINSZ, winsize(t)); err != nil {
		return -1, fmt.Errorf("set the terminal's size: %w", err)
	}
	// TIOCGPTPEER (Linux 4.13) opens the slave of this very master, whatever is mounted
	// at /dev/pts; older kernels open it by name.
	fd, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(mfd), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if e == 0 {
		return int(fd), nil
	}
	n, err := unix.IoctlGetUint32(mfd, unix.TIOCGPTN)
	if err != nil {
		return -1, fmt.Errorf("find the terminal's slave: %w", err)
	}
	sfd, err := unix.Open("/dev/pts/"+strconv.FormatUint(uint64(n), 10), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the terminal's slave: %w", err)
	}
	return sfd, nil
}

func winsize(t proc.Terminal) *unix.Winsize {
	return &unix.Winsize{Col: uint16(t.Cols), Row: uint16(t.Rows)}
}

// newTerminal is the terminal of master, which must be a pty master: anything else (a
// Starter that handed over another file) is refused.
func newTerminal(master *os.File) (*terminal, error) {
	var n uint32
	var err error
	if ctlErr := control(master, func(fd int) { n, err = unix.IoctlGetUint32(fd, unix.TIOCGPTN) }); ctlErr != nil {
		err = ctlErr
	}
	if err != nil {
		return nil, fmt.Errorf("the terminal handed over is not a pty master: %w", err)
	}
	return &terminal{master: master, rdev: unix.Mkdev(ptySlaveMajor, n)}, nil
}

// control runs fn on f's descriptor.
func control(f *os.File, fn func(fd int)) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(func(fd uintptr) { fn(int(fd)) })
}

// terminalStdio plans the leader's stdio under a terminal: the slave as stdin, stdout
// and stderr, or, when a Starter allocates the terminal, nothing yet (Master comes
// with the start).
func (s *Supervisor) terminalStdio(l *launch, p *Process, t proc.Terminal) error {
	if l.starter != nil {
		return nil
	}
	master, slave, err := openTerminal(t)
	if err != nil {
		return err
	}
	tty, err := newTerminal(master)
	if err != nil {
		master.Close()
		slave.Close()
		return &proc.SpawnError{Op: "terminal", Err: err}
	}
	l.child = [3]*os.File{slave, slave, slave}
	l.ownStdin = true // the slave is this spawn's: closed once the leader has it
	p.rOut, p.tty = master, tty
	return nil
}

// takeMaster takes the terminal a Starter allocated for the leader it started.
func (p *Process) takeMaster(st proc.Started) error {
	ts, ok := st.(proc.TerminalStarted)
	if !ok {
		return errors.New("the starter allocated no terminal")
	}
	master := ts.Master()
	if master == nil {
		return errors.New("the starter handed over no terminal")
	}
	tty, err := newTerminal(master)
	if err != nil {
		master.Close()
		return err
	}
	p.rOut, p.tty = master, tty
	return nil
}

// WriteInput writes b to the terminal of a process spawned with Spec.Terminal, as if
// typed. It returns once the terminal took all of it, or fails: ctx ended first (the
// error says how much was written), or the process takes no more input
// (proc.ErrInputClosed: it finished, or CloseInput ran).
func (p *Process) WriteInput(ctx context.Context, b []byte) error {
	t := p.tty
	if t == nil {
		return errors.New("subprocess: the process has no terminal")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return proc.ErrInputClosed
	}
	return p.writeLocked(ctx, b)
}

// writeLocked writes b to the master under t.mu, bounded by ctx.
func (p *Process) writeLocked(ctx context.Context, b []byte) error {
	t := p.tty
	if p.tear.State() != proc.Running {
		return proc.ErrInputClosed
	}
	deadline, _ := ctx.Deadline()
	if err := t.master.SetWriteDeadline(deadline); err != nil {
		return inputError(err)
	}
	stop := context.AfterFunc(ctx, func() { _ = t.master.SetWriteDeadline(time.Now()) })
	n, err := t.master.Write(b)
	stop()
	if n > 0 {
		t.last = b[n-1]
	}
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("writing to the terminal: %w (%d of %d bytes written)", context.Cause(ctx), n, len(b))
	}
	return inputError(err)
}

// inputError is the error of a write to a terminal whose process has gone: its slave
// side is closed (EIO), or its master already (the process settled).
func inputError(err error) error {
	if errors.Is(err, syscall.EIO) || errors.Is(err, os.ErrClosed) {
		return proc.ErrInputClosed
	}
	return fmt.Errorf("writing to the terminal: %w", err)
}

// CloseInput ends the terminal's input as its user would (proc.EndOfInput). Later
// writes fail with proc.ErrInputClosed; closing again does nothing.
func (p *Process) CloseInput(ctx context.Context) error {
	t := p.tty
	if t == nil {
		return errors.New("subprocess: the process has no terminal")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	eof := proc.EndOfInput(t.last)
	err := p.writeLocked(ctx, eof)
	t.closed = err == nil || errors.Is(err, proc.ErrInputClosed)
	if errors.Is(err, proc.ErrInputClosed) {
		return nil // the command has finished: its input has ended already
	}
	return err
}

// Resize changes the terminal's size; the kernel sends SIGWINCH to its foreground
// process group.
func (p *Process) Resize(size proc.Terminal) error {
	t := p.tty
	if t == nil {
		return errors.New("subprocess: the process has no terminal")
	}
	if err := size.Check(); err != nil {
		return fmt.Errorf("subprocess: invalid terminal: %w", err)
	}
	var err error
	if cerr := control(t.master, func(fd int) { err = unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, winsize(size)) }); cerr != nil {
		return inputError(cerr)
	}
	return err
}

// WaitingForInput reports whether a process of the terminal's foreground process group
// is blocked reading the terminal (see waitingOn); known is false for a process
// without a terminal, or once it has settled.
func (p *Process) WaitingForInput() (waiting, known bool) {
	t := p.tty
	if t == nil || p.tear.State() != proc.Running {
		return false, false
	}
	pgrp := -1
	if err := control(t.master, func(fd int) { pgrp, _ = unix.IoctlGetInt(fd, unix.TIOCGPGRP) }); err != nil || pgrp <= 0 {
		return false, true
	}
	return waitingOn(t.rdev, p.groupMembers(pgrp)), true
}

// groupMembers lists the live processes of group pgrp in the tree: from its cgroup when
// it has one, else from a scan of /proc.
func (p *Process) groupMembers(pgrp int) []int {
	if p.cg != nil {
		if pids, ok := cgroupProcs(p.cg.path); ok {
			var out []int
			for _, pid := range pids {
				if st, ok := readStat(pid); ok && st.pgrp == pgrp && st.state != 'Z' {
					out = append(out, pid)
				}
			}
			return out
		}
	}
	return groupPids(pgrp)
}

// Detach takes back the deadline and the context of Spawn: from now on only Kill (or
// the Supervisor's Close) ends the tree. False once the tree is being killed or the
// leader exited.
func (p *Process) Detach() bool { return p.tear.Disarm() }
