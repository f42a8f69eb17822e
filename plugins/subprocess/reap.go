package subprocess

import (
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/proc"
)

// The leader is reaped late. Its process id is also the id of the tree's process group
// and session, and the kernel keeps an id allocated while any process, a zombie
// included, still uses it. So while the leader is an unreaped zombie, signalling the
// group by number (kill(-pgid)) can only reach members of this tree, never a process
// that reused the id. The Supervisor therefore learns of the leader's exit without
// reaping it (waitid with WNOWAIT) and reaps it (release) only once nothing will signal
// the group any more: when the tree is found empty, or after the SIGKILL escalation.
//
// This relies on nothing else in the harness waiting for the leader: it is started with
// syscall.ForkExec, so no os.Process (and no os/exec) knows it; a wait(-1) elsewhere, or
// SIGCHLD set to SIG_IGN, would break the guarantee (the loss is detected, and the group
// is then no longer signalled by number).

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

// waitid idtypes.
const (
	pPID   = 1
	pPIDFD = 3
)

func waitid(idtype int, id uintptr, info *siginfo, options int) syscall.Errno {
	_, _, e := syscall.Syscall6(syscall.SYS_WAITID, uintptr(idtype), id, uintptr(unsafe.Pointer(info)), uintptr(options), 0, 0)
	return e
}

// exit decodes the siginfo of an exited child.
func (info *siginfo) exit() proc.Exit {
	const cldKilled, cldDumped = 2, 3 // si_code values of a signal death
	switch info.code {
	case cldKilled, cldDumped:
		return proc.Signaled(syscall.Signal(info.status))
	}
	return proc.Exited(int(info.status))
}

// awaitExit waits for the leader to exit and returns how it ended, leaving it a zombie
// (see release). With a pidfd the wait parks in the runtime's poller (the pidfd turns
// readable when the process exits), so a waiting process costs no OS thread and its exit
// wakes the same poll round as its pipes. The pidfd is closed once the exit is known:
// the zombie itself keeps the pid from being reused.
func (p *Process) awaitExit() proc.Exit {
	if p.started != nil {
		ex, err := p.started.Wait()
		if err != nil {
			return p.lostStarted(err)
		}
		return ex
	}
	if p.pidfd >= 0 {
		if st, ok := p.awaitPidfd(); ok {
			return st
		}
	}
	var info siginfo
	for {
		info = siginfo{}
		e := waitid(pPID, uintptr(p.pid), &info, syscall.WEXITED|unix.WNOWAIT)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return p.lost()
		}
		return info.exit()
	}
}

// noticeExit tells the teardown of a leader that exited already, before its waiter
// does, so that a Kill that comes after the exit ends only the rest of the tree and
// the status stays the leader's own (the waiter's report then changes nothing). It
// looks without reaping; a leader is reaped only once its tree settled, when the
// teardown takes no exit any more, so a pid reused since cannot mislead it. A leader
// a Starter started reports its exit through the Starter alone.
func (p *Process) noticeExit() {
	if p.started != nil || p.pid <= 0 {
		return
	}
	var info siginfo
	if waitid(pPID, uintptr(p.pid), &info, syscall.WEXITED|syscall.WNOHANG|unix.WNOWAIT) == 0 && info.pid != 0 {
		p.tear.Exited(info.exit())
	}
}

// awaitPidfd waits through the pidfd (which it closes). It reports false only if the
// pidfd cannot be polled.
func (p *Process) awaitPidfd() (proc.Exit, bool) {
	fd := p.pidfd
	p.pidfd = -1
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return proc.Exit{}, false
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return proc.Exit{}, false
	}
	var info siginfo
	var werr syscall.Errno
	exited := false
	err = rc.Read(func(fd uintptr) bool {
		for {
			info = siginfo{}
			switch e := waitid(pPIDFD, fd, &info, syscall.WEXITED|syscall.WNOHANG|unix.WNOWAIT); e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false
			case 0:
				exited = info.pid != 0
				return exited
			default:
				werr = e
				return true
			}
		}
	})
	switch {
	case werr != 0:
		return p.lost(), true
	case err != nil || !exited:
		return proc.Exit{}, false // not pollable: the caller waits by pid
	}
	return info.exit(), true
}

// lost handles a leader that something else reaped (ECHILD): nothing is knowable about
// how it ended, and its id may already be reused, so the group is never signalled by
// number again (a cgroup still is).
func (p *Process) lost() proc.Exit {
	p.sigMu.Lock()
	p.reaped = true
	p.watchdog.untrack(p.pid)
	p.sigMu.Unlock()
	p.sup.log.Warn("subprocess: a command's leader was reaped outside the supervisor; its process group can no longer be signalled", "pid", p.pid)
	return proc.Signaled(syscall.SIGKILL)
}

// lostStarted handles a Starter's leader whose exit cannot be known (Started.Wait
// failed): the group is never signalled by number again, what the cgroup holds is
// killed, and the process settles as killed by SIGKILL with the error as a note.
func (p *Process) lostStarted(err error) proc.Exit {
	p.sigMu.Lock()
	p.reaped = true
	p.watchdog.untrack(p.pid)
	p.sigMu.Unlock()
	p.signal(syscall.SIGKILL) // the cgroup only, now
	p.note = "[subprocess: " + err.Error() + "]\n"
	p.sup.log.Warn("subprocess: a command's leader was lost", "pid", p.pid, "err", err)
	return proc.Signaled(syscall.SIGKILL)
}

// release reaps the zombie leader, which frees its id for reuse. From then on the group
// is never signalled by number: sigMu orders release after any signal in flight. It must
// only be called after awaitExit returned.
func (p *Process) release() {
	p.sigMu.Lock()
	defer p.sigMu.Unlock()
	if p.reaped {
		return
	}
	p.reaped = true
	p.watchdog.untrack(p.pid) // before the id may be reused
	if p.started != nil {
		p.started.Release()
		return
	}
	var info siginfo
	for waitid(pPID, uintptr(p.pid), &info, syscall.WEXITED|syscall.WNOHANG) == syscall.EINTR {
	}
}
