package launch

import (
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// leader is one command's leader process, a child of this process.
type leader struct {
	id    uint64
	pid   int
	pidfd *os.File
	state leaderState
}

// leaderState is where a leader is between its start and its reaping, which waits for
// both its exit and dsh's release (dsh signals the leader's group by its pid, which
// must not be reused before dsh is done):
//
//	running ──exit──▶ exited ──release──▶ reaped (gone from leaders)
//	running ──release──▶ released ──exit──▶ reaped
type leaderState uint8

const (
	leaderRunning  leaderState = iota
	leaderExited               // a zombie until dsh releases it
	leaderReleased             // running, reaped as soon as it exits
)

// leaders are a box's command leaders, by command id, and the scans that reap the
// orphans re-parented to the box.
type leaders struct {
	// mu orders starts with orphan scans: a scan never reaps a leader that is being
	// registered (starting > 0 makes it wait).
	mu       sync.Mutex
	starting int
	byID     map[uint64]*leader
	scanAt   *time.Timer
}

// begin counts a start whose leader may appear as a child before add has it.
func (ls *leaders) begin() {
	ls.mu.Lock()
	ls.starting++
	ls.mu.Unlock()
}

// abort ends a start that made no leader.
func (ls *leaders) abort() {
	ls.mu.Lock()
	ls.starting--
	ls.mu.Unlock()
}

// add ends a start that made the leader l.
func (ls *leaders) add(l *leader) {
	ls.mu.Lock()
	ls.byID[l.id] = l
	ls.starting--
	ls.mu.Unlock()
}

// exited records l's exit; it reports whether dsh released l already (it is then to
// be reaped at once).
func (ls *leaders) exited(l *leader) (released bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	released = l.state == leaderReleased
	l.state = leaderExited
	return released
}

// release reaps the leader of command id (dsh is done signalling its group), or has it
// reaped when it exits.
func (ls *leaders) release(id uint64) {
	ls.mu.Lock()
	l := ls.byID[id]
	if l == nil {
		ls.mu.Unlock()
		return
	}
	if l.state != leaderExited {
		l.state = leaderReleased // reaped when it exits
		ls.mu.Unlock()
		return
	}
	delete(ls.byID, id)
	ls.mu.Unlock()
	Reap(l.pid)
	l.pidfd.Close()
}

// killAll kills the group of every leader still running.
func (ls *leaders) killAll() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, l := range ls.byID {
		if l.state != leaderExited {
			syscall.Kill(-l.pid, syscall.SIGKILL)
		}
	}
}

// scan reaps exited orphans: descendants of the commands that were re-parented to this
// process (the init of the PID namespace, or a subreaper). Leaders are never reaped
// here. It runs a little after a leader exits (scans coalesce: one per scanDelay at
// most), and again while some children other than leaders live on; an orphan's zombie
// lingers that long, holding nothing but its pid.
func (ls *leaders) scan() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.starting > 0 {
		ls.scanLaterLocked()
		return
	}
	leaders := make(map[int]bool, len(ls.byID))
	for _, l := range ls.byID {
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
		ls.scanLaterLocked()
	}
}

// scanDelay is how long after an exit the orphans are looked for.
const scanDelay = 100 * time.Millisecond

// scanLater has the orphans scanned for a little later.
func (ls *leaders) scanLater() {
	ls.mu.Lock()
	ls.scanLaterLocked()
	ls.mu.Unlock()
}

func (ls *leaders) scanLaterLocked() {
	if ls.scanAt != nil {
		return
	}
	ls.scanAt = time.AfterFunc(scanDelay, func() {
		ls.mu.Lock()
		ls.scanAt = nil
		ls.mu.Unlock()
		ls.scan()
	})
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
