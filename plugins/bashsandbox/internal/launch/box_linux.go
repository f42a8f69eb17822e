package launch

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// RunBox runs a box on the control socket ctlfd (see the package
// documentation): it reads the Setup, builds the box (mount tree and network in the
// namespaces it was started in, or nothing more in the Landlock-only mode), answers
// Ready, then starts each requested command confined, reports each leader's exit and
// reaps it when told. It returns nil when dsh closes the connection; in the namespaces
// every command then dies with this process (it is the init of their PID namespace).
func RunBox(ctlfd int) error {
	// Nothing this process inherited may reach a command: from now on every descriptor
	// is closed on exec (the commands get exactly the three they are given).
	if err := closeRangeCloexec(3); err != nil {
		return errors.New("close-on-exec for inherited descriptors: " + err.Error())
	}
	// Commands must not read this process's memory or environment.
	if err := SetDumpable(false); err != nil {
		return errors.New("prctl(PR_SET_DUMPABLE): " + err.Error())
	}
	exe, err := syscall.Open("/proc/self/exe", oPath|syscall.O_CLOEXEC, 0)
	if err != nil {
		return errors.New("open /proc/self/exe: " + err.Error())
	}
	conn, err := NewConn(ctlfd)
	if err != nil {
		return errors.New("control socket: " + err.Error())
	}
	defer conn.Close()
	s := &box{conn: conn, exe: exe, leaders: map[uint64]*leader{}}
	payload, fds, err := conn.Recv()
	if err != nil {
		return errors.New("read the setup: " + err.Error())
	}
	if err := s.setup(payload, fds); err != nil {
		conn.Send((&Reply{Type: MsgFailed, Message: err.Error()}).Encode())
		return errors.New("setup: " + err.Error())
	}
	if err := conn.Send((&Reply{Type: MsgReady}).Encode()); err != nil {
		return err
	}
	for {
		payload, fds, err := conn.Recv()
		if err != nil {
			s.shutdown()
			if err == ErrClosed {
				return nil
			}
			return errors.New("control connection: " + err.Error())
		}
		if len(payload) == 0 {
			closeFDs(fds)
			continue
		}
		switch payload[0] {
		case MsgStart:
			m, err := DecodeStart(payload)
			if err != nil {
				closeFDs(fds)
				s.shutdown()
				return err
			}
			s.start(m, fds)
		case MsgRelease:
			closeFDs(fds)
			m, err := DecodeRelease(payload)
			if err != nil {
				s.shutdown()
				return err
			}
			s.release(m.ID)
		default:
			closeFDs(fds)
			s.shutdown()
			return errors.New("unexpected control message type " + strconv.Itoa(int(payload[0])))
		}
	}
}

// box is the state of the box this process runs.
type box struct {
	conn     *Conn
	exe      int // the dsh binary (O_PATH), for the launcher's failure mode
	ns       bool
	network  string
	pinned   map[string]int // the pinned workspace root's descriptor, by path
	dropCaps bool
	lastCap  int

	pmu sync.Mutex // serialises protect (mounts)
	pr  protector

	rmu      sync.Mutex
	rulesets map[string]cachedRuleset // by policy

	spares chan spare

	// mu orders starts with orphan scans: a scan never reaps a leader that is being
	// registered (starting > 0 makes it wait).
	mu       sync.Mutex
	starting int
	leaders  map[uint64]*leader
	scanAt   *time.Timer
}

// leader is one command's leader process, a child of this process.
type leader struct {
	id       uint64
	pid      int
	pidfd    *os.File
	exited   bool
	released bool
}

func (s *box) setup(payload []byte, fds []int) error {
	m, err := DecodeSetup(payload)
	if err != nil {
		closeFDs(fds)
		return err
	}
	if m.Network != NetworkDeny && m.Network != NetworkAllow {
		closeFDs(fds)
		return errors.New("invalid network policy " + strconv.Quote(m.Network))
	}
	s.ns, s.network = m.Namespaces, m.Network
	s.pinned = map[string]int{}
	want := 0
	if m.Workspace != "" {
		want++
	}
	if m.Spill != "" {
		want++
	}
	if len(fds) != want {
		closeFDs(fds)
		return errors.New("the setup has " + strconv.Itoa(len(fds)) + " descriptors, want " + strconv.Itoa(want) + " (the pinned workspace, the spill directory)")
	}
	wsfd, spillfd := -1, -1
	if m.Workspace != "" {
		wsfd = fds[0]
		s.pinned[m.Workspace] = wsfd
		fds = fds[1:]
	}
	if m.Spill != "" {
		spillfd = fds[0]
		defer syscall.Close(spillfd) // only its mount stays
	}
	if s.ns {
		spill, blank, err := buildRoot(&m, wsfd, spillfd)
		if err != nil {
			return err
		}
		if s.network == NetworkDeny {
			if err := loUp(); err != nil {
				closeFD(spill)
				return err
			}
		}
		if err := s.pr.build(&m, spill, blank); err != nil {
			return err
		}
	} else if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetSubreaper, 1, 0, 0, 0, 0); e != 0 {
		// Orphaned descendants of the commands come here, to be reaped.
		return errors.New("prctl(PR_SET_CHILD_SUBREAPER): " + e.Error())
	}
	s.dropCaps = holdsCap(capSetpcap)
	s.lastCap = lastCapability()
	if SeccompSupported {
		// The filter is the same for every command of the session: installed once, on
		// every thread of this process (which makes no socket of its own from now on
		// and uses no keyring), it is inherited by each command thread and its fork —
		// compiling a filter per command would cost more than the rest of the
		// confinement.
		if err := filterProcess(commandFilter(filterArches, s.network == NetworkDeny, !s.ns)); err != nil {
			return errors.New("seccomp: " + err.Error())
		}
	}
	s.spares = make(chan spare, spareThreads)
	for range spareThreads {
		s.makeSpare()
	}
	return nil
}

const capSetpcap = 8

// start starts one command (it runs in its own goroutine) and answers Started or
// Failed. fds are stdin, stdout, stderr and, when m.Cgroup, the cgroup directory.
func (s *box) start(m Start, fds []int) {
	closeOnReturn := true
	defer func() {
		if closeOnReturn {
			closeFDs(fds)
		}
	}()
	failed := func(r Reply) {
		r.Type, r.ID = MsgFailed, m.ID
		s.conn.Send(r.Encode())
	}
	want := 3
	if m.Cgroup {
		want = 4
	}
	if len(fds) != want {
		failed(Reply{Message: "start: expected " + strconv.Itoa(want) + " descriptors, got " + strconv.Itoa(len(fds))})
		return
	}
	if m.Policy.Network != s.network {
		failed(Reply{Message: "start: the command's network policy " + strconv.Quote(m.Policy.Network) + " is not the sandbox's " + strconv.Quote(s.network)})
		return
	}
	if err := m.Policy.Validate(); err != nil {
		failed(Reply{Message: "start: " + err.Error()})
		return
	}
	if s.ns && len(m.Protect)+len(m.MaskFiles) > 0 {
		s.pmu.Lock()
		err := s.pr.update(m.Protect, m.MaskFiles)
		s.pmu.Unlock()
		if err != nil {
			failed(Reply{Message: err.Error()})
			return
		}
	}

	attr := &syscall.ProcAttr{Dir: m.Dir, Env: m.Env, Files: []uintptr{uintptr(fds[0]), uintptr(fds[1]), uintptr(fds[2])}}
	pidfd := -1
	sys := &syscall.SysProcAttr{Setsid: true, PidFD: &pidfd}
	if m.Cgroup {
		sys.UseCgroupFD, sys.CgroupFD = true, fds[3]
	}
	attr.Sys = sys

	rs, flags, rerr := s.ruleset(m.Policy)
	s.mu.Lock()
	s.starting++
	s.mu.Unlock()
	closeOnReturn = false
	s.onSpare(func(prepared error) {
		// This goroutine's thread is confined, forks the command, answers, and dies.
		defer closeFDs(fds)
		var f forked
		err := prepared
		if err == nil {
			err = rerr
		}
		if err == nil {
			err = restrictThread(rs, flags)
		}
		if err != nil {
			f.confined = err
			stub := &syscall.ProcAttr{Files: attr.Files, Sys: sys}
			f.pid, f.err = syscall.ForkExec("/proc/self/fd/"+strconv.Itoa(s.exe), []string{"dsh-sandbox", FailArg, "confine the command: " + err.Error()}, stub)
		} else {
			f.pid, f.err = syscall.ForkExec(m.Path, m.Argv, attr)
		}
		s.started(m, f, pidfd, failed)
	})
}

// forked is how a start's fork went.
type forked struct {
	pid      int
	err      error
	confined error // why confinement failed: the launcher's failure mode ran instead
}

// started registers the leader of a start that forked and answers Started (or Failed).
func (s *box) started(m Start, f forked, pidfd int, failed func(Reply)) {
	s.mu.Lock()
	if f.err != nil {
		s.starting--
		s.mu.Unlock()
		failed(forkFailure(m, f))
		return
	}
	_ = syscall.SetNonblock(pidfd, true) // if it fails, await blocks a thread instead
	l := &leader{id: m.ID, pid: f.pid, pidfd: os.NewFile(uintptr(pidfd), "pidfd")}
	s.leaders[m.ID] = l
	s.starting--
	s.mu.Unlock()

	dup, err := dupCloexec(pidfd)
	if err != nil {
		// The leader runs; dsh learns its pid from the reply's descriptor only.
		failed(Reply{Message: "duplicate the pidfd: " + err.Error()})
		syscall.Kill(-f.pid, syscall.SIGKILL)
		s.mu.Lock()
		l.released = true
		s.mu.Unlock()
		go s.await(l)
		return
	}
	s.conn.Send((&Reply{Type: MsgStarted, ID: m.ID, Pid: f.pid, LaunchFailed: f.confined != nil}).Encode(), dup)
	syscall.Close(dup)
	go s.await(l)
}

// forkFailure is the Failed reply to a start whose fork failed: the exec's errno, or
// the working directory's when that is what is wrong with it.
func forkFailure(m Start, f forked) Reply {
	if f.confined != nil {
		return Reply{Message: "confine the command: " + f.confined.Error() + "; and the runner-failure stub did not start: " + f.err.Error()}
	}
	r := Reply{Op: "exec", Path: m.Path}
	var errno syscall.Errno
	if errors.As(f.err, &errno) {
		r.Errno = int(errno)
	} else {
		r.Message = f.err.Error()
	}
	if m.Dir != "" {
		if fi, err := os.Stat(m.Dir); err != nil || !fi.IsDir() {
			r.Op, r.Path = "chdir", m.Dir
			if err == nil {
				r.Errno = int(syscall.ENOTDIR)
			} else if errors.As(err, &errno) {
				r.Errno = int(errno)
			}
		}
	}
	return r
}

// Spare threads: goroutines locked to threads already prepared for a command
// (prepareThread), waiting for one. Each start takes one and has another made, so the
// thread's creation and the costly part of its confinement are off the command's path.
const spareThreads = 2

// spare is a prepared thread waiting for its one job; err says why it could not be
// prepared (the job then starts the launcher's failure mode).
type spare struct {
	job chan func(prepared error)
}

// makeSpare starts a spare thread.
func (s *box) makeSpare() {
	go func() {
		err := prepareThread(s.dropCaps, s.lastCap) // locks the goroutine to its thread
		sp := spare{job: make(chan func(error), 1)}
		s.spares <- sp
		(<-sp.job)(err)
	}()
}

// onSpare runs job on a prepared thread (a spare, or a new one when none is ready),
// which dies when job returns.
func (s *box) onSpare(job func(prepared error)) {
	select {
	case sp := <-s.spares:
		s.makeSpare()
		sp.job <- job
	default:
		go func() { job(prepareThread(s.dropCaps, s.lastCap)) }()
	}
}

// ruleset returns the Landlock ruleset of p, made once per distinct policy and kept
// (a ruleset may restrict any number of threads; each restriction is a domain of its
// own, so commands still cannot signal or trace each other).
func (s *box) ruleset(p Policy) (int, uint32, error) {
	key := p.Mode + "\x00" + p.WorkspaceRoot + "\x00" + p.Network
	for _, r := range p.WritableRoots {
		key += "\x00" + r
	}
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if r, ok := s.rulesets[key]; ok {
		return r.fd, r.flags, nil
	}
	fd, flags, err := newRuleset(p, s.pinned)
	if err != nil {
		return -1, 0, err
	}
	if s.rulesets == nil {
		s.rulesets = map[string]cachedRuleset{}
	}
	s.rulesets[key] = cachedRuleset{fd, flags}
	return fd, flags, nil
}

type cachedRuleset struct {
	fd    int
	flags uint32
}

// await waits for l's exit without reaping it and reports it (Exited).
func (s *box) await(l *leader) {
	code, sig, _ := AwaitExit(l.pid, l.pidfd)
	s.mu.Lock()
	l.exited = true
	release := l.released
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
	if !l.exited {
		l.released = true // reaped when it exits
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
		if !l.exited {
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

func closeFDs(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

func dupCloexec(fd int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// closeRangeCloexec marks every descriptor from first on close-on-exec.
func closeRangeCloexec(first int) error {
	const sysCloseRange = 436        // the same number on every architecture
	const closeRangeCloexec = 1 << 2 // CLOSE_RANGE_CLOEXEC
	_, _, e := syscall.Syscall(sysCloseRange, uintptr(first), ^uintptr(0)>>32, closeRangeCloexec)
	if e == 0 {
		return nil
	}
	if e != syscall.ENOSYS && e != syscall.EINVAL {
		return e
	}
	// Before Linux 5.11: one by one.
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, d := range entries {
		if fd, err := strconv.Atoi(d.Name()); err == nil && fd >= first {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
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
