package subprocess

import (
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// exitStatus is how the leader ended: a signal, or else an exit code.
type exitStatus struct {
	code   int
	signal syscall.Signal
}

var pidfdSupported = sync.OnceValue(func() bool {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
})

// siginfo is the part of the kernel's siginfo_t that waitid fills for a child.
type siginfo struct {
	signo  int32
	errno  int32
	code   int32
	_      int32
	pid    int32
	uid    uint32
	status int32
	_      [100]byte
}

const pPIDFD = 3 // waitid idtype P_PIDFD

// reap waits for the leader to exit and reaps it. With a pidfd the wait parks in the
// runtime's poller (the pidfd turns readable when the process exits), so a waiting
// process costs no OS thread and its exit wakes the same poll round as its pipes.
func (p *Process) reap() exitStatus {
	if p.pidfd >= 0 {
		if st, ok := p.reapPidfd(); ok {
			return st
		}
	}
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(p.pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	if ws.Signaled() {
		return exitStatus{signal: ws.Signal()}
	}
	return exitStatus{code: ws.ExitStatus()}
}

// reapPidfd reaps through the pidfd (which it closes). It reports false, with the
// child not reaped, only if the pidfd cannot be polled.
func (p *Process) reapPidfd() (exitStatus, bool) {
	fd := p.pidfd
	p.pidfd = -1
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return exitStatus{}, false
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return exitStatus{}, false
	}
	var info siginfo
	var werr syscall.Errno
	reaped := false
	err = rc.Read(func(fd uintptr) bool {
		for {
			info = siginfo{}
			_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPIDFD, fd, uintptr(unsafe.Pointer(&info)),
				syscall.WEXITED|syscall.WNOHANG, 0, 0)
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false
			case 0:
				reaped = info.pid != 0
				return reaped
			}
			werr = e
			return true
		}
	})
	switch {
	case werr != 0:
		// ECHILD: reaped elsewhere (cannot happen for our own child); nothing is
		// knowable about how it ended.
		return exitStatus{signal: syscall.SIGKILL}, true
	case err != nil || !reaped:
		return exitStatus{}, false // not pollable: the caller waits with wait4
	}
	const cldKilled, cldDumped = 2, 3 // si_code values of a signal death
	switch info.code {
	case cldKilled, cldDumped:
		return exitStatus{signal: syscall.Signal(info.status)}, true
	}
	return exitStatus{code: int(info.status)}, true
}
