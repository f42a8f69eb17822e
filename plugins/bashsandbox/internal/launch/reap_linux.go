package launch

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

// await waits for l's exit without reaping it and reports it (Exited).
func (s *box) await(l *leader) {
	code, sig, _ := AwaitExit(l.pid, l.pidfd)
	s.mu.Lock()
	release := l.state == leaderReleased
	l.state = leaderExited
	s.mu.Unlock()
	s.conn.Send((&Reply{Type: MsgExited, ID: l.id, Code: code, Signal: sig}).Encode())
	if release {
		s.release(l.id)
	}
	s.mu.Lock()
	s.scanLaterLocked()
	s.mu.Unlock()
}

// release reaps the leader of command id (dsh is done signalling its group).
func (s *box) release(id uint64) {
	s.mu.Lock()
	l := s.leaders[id]
	if l == nil {
		s.mu.Unlock()
		return
	}
	if l.state != leaderExited {
		l.state = leaderReleased // reaped when it exits
		s.mu.Unlock()
		return
	}
	delete(s.leaders, id)
	s.mu.Unlock()
	Reap(l.pid)
	l.pidfd.Close()
}

// scan reaps exited orphans: descendants of the commands that were re-parented to this
// process (the init of the PID namespace, or a subreaper). Leaders are never reaped
// here. It runs a little after a leader exits (scans coalesce: one per scanDelay at
// most), and again while some children other than leaders live on; an orphan's zombie
// lingers that long, holding nothing but its pid.
func (s *box) scan() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.starting > 0 {
		s.scanLaterLocked()
		return
	}
	leaders := make(map[int]bool, len(s.leaders))
	for _, l := range s.leaders {
		leaders[l.pid] = true
	}
	others := false
	for _, pid := range children() {
		if leaders[pid] {
			continue
		}
		var info siginfo
		for {
			e := waitid(pPID, uintptr(pid), &info, syscall.WEXITED|syscall.WNOHANG)
			if e != syscall.EINTR {
				break
			}
		}
		if info.pid == 0 {
			others = true // still running
		}
	}
	if others {
		s.scanLaterLocked()
	}
}

// scanDelay is how long after an exit the orphans are looked for.
const scanDelay = 100 * time.Millisecond

func (s *box) scanLaterLocked() {
	if s.scanAt != nil {
		return
	}
	s.scanAt = time.AfterFunc(scanDelay, func() {
		s.mu.Lock()
		s.scanAt = nil
		s.mu.Unlock()
		s.scan()
	})
}

// shutdown ends what is left when dsh is gone. In the namespaces returning is enough:
// the PID namespace dies with its init. Without them, each leader's group is killed.
func (s *box) shutdown() {
	if s.ns {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.leaders {
		if l.state != leaderExited {
			syscall.Kill(-l.pid, syscall.SIGKILL)
		}
	}
}

// children lists this process's children (every thread's).
func children() []int {
	var out []int
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		n, in := 0, false
		for _, c := range b {
			if c >= '0' && c <= '9' {
				n, in = n*10+int(c-'0'), true
				continue
			}
			if in {
				out = append(out, n)
			}
			n, in = 0, false
		}
		if in {
			out = append(out, n)
		}
	}
	return out
}

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

const (
	pPID    = 1
	pPIDFD  = 3
	wNowait = 0x1000000
)

func waitid(idtype int, id uintptr, info *siginfo, options int) syscall.Errno {
	_, _, e := syscall.Syscall6(syscall.SYS_WAITID, uintptr(idtype), id, uintptr(unsafe.Pointer(info)), uintptr(options), 0, 0)
	return e
}

// AwaitExit waits until the child pid has exited and returns its exit code or the signal
// that ended it, without reaping it: the child stays a zombie (its pid, and the group id
// it leads, cannot be reused) until Reap. It waits through pidfd, polled by the Go
// runtime, when it can, else in a blocking waitid on this goroutine's thread; an error
// means the child is not this process's (or is gone).
func AwaitExit(pid int, pidfd *os.File) (code, signal int, err error) {
	var info siginfo
	exited := false
	if pidfd != nil {
		if rc, err := pidfd.SyscallConn(); err == nil {
			_ = rc.Read(func(fd uintptr) bool {
				for {
					info = siginfo{}
					switch e := waitid(pPIDFD, fd, &info, syscall.WEXITED|syscall.WNOHANG|wNowait); e {
					case syscall.EINTR:
						continue
					case syscall.EAGAIN:
						return false
					case 0:
						exited = info.pid != 0
						return exited
					default:
						return true
					}
				}
			})
		}
	}
	for !exited {
		info = siginfo{}
		switch e := waitid(pPID, uintptr(pid), &info, syscall.WEXITED|wNowait); e {
		case syscall.EINTR:
			continue
		case 0:
			exited = true
		default:
			return 0, 0, e
		}
	}
	code, signal = info.decode()
	return code, signal, nil
}

// Reap reaps the exited child pid (see AwaitExit).
func Reap(pid int) {
	var info siginfo
	for waitid(pPID, uintptr(pid), &info, syscall.WEXITED|syscall.WNOHANG) == syscall.EINTR {
	}
}

// decode decodes an exited child's siginfo: its exit code, or the signal that ended it.
func (info *siginfo) decode() (code, signal int) {
	const cldKilled, cldDumped = 2, 3
	switch info.code {
	case cldKilled, cldDumped:
		return 0, int(info.status)
	}
	return int(info.status), 0
}
