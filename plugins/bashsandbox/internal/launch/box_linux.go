package launch

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// RunBox runs a box on the control socket ctlfd (see the package documentation): it
// reads the Setup, builds the box (mount tree and network in the namespaces it was
// started in, or nothing more in the Landlock-only mode), answers Ready, then starts
// each requested command confined, reports each leader's exit and reaps it when told.
// It returns nil when dsh closes the connection; in the namespaces every command then
// dies with this process (it is the init of their PID namespace).
func RunBox(ctlfd int) error {
	s, err := newBox(ctlfd)
	if err != nil {
		return err
	}
	defer s.conn.Close()
	payload, fds, err := s.conn.Recv()
	if err != nil {
		return errors.New("read the setup: " + err.Error())
	}
	if err := s.setup(payload, fds); err != nil {
		s.conn.Send((&Reply{Type: MsgFailed, Message: err.Error()}).Encode())
		return errors.New("setup: " + err.Error())
	}
	if err := s.conn.Send((&Reply{Type: MsgReady}).Encode()); err != nil {
		return err
	}
	return s.serve()
}

// box is the state of the box this process runs.
type box struct {
	conn    *Conn
	exe     int // the dsh binary (O_PATH), for the launcher's failure mode
	ns      bool
	network string
	hold    bool // commands are held at their exec to be put in their cgroup (placement)

	pmu    sync.Mutex // serialises the plans' mounts
	mounts *mounts    // namespaces only
	roots  []string   // the writable roots, as mounted (namespaces only)

	rulesets rulesets
	threads  *threads
	leaders  leaders
}

// newBox readies this process to be a box on the control socket ctlfd: nothing it
// inherited reaches a command, and no command can read its memory.
func newBox(ctlfd int) (*box, error) {
	// Nothing this process inherited may reach a command: from now on every descriptor
	// is closed on exec (the commands get exactly the three they are given).
	if err := closeRangeCloexec(3); err != nil {
		return nil, errors.New("close-on-exec for inherited descriptors: " + err.Error())
	}
	// Commands must not read this process's memory or environment.
	if err := SetDumpable(false); err != nil {
		return nil, errors.New("prctl(PR_SET_DUMPABLE): " + err.Error())
	}
	// The OOM killer chooses the box and its commands (which inherit it) before the
	// harness (raising one's own score needs no privilege; best effort).
	oomFirst()
	exe, err := syscall.Open("/proc/self/exe", oPath|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, errors.New("open /proc/self/exe: " + err.Error())
	}
	conn, err := NewConn(ctlfd)
	if err != nil {
		return nil, errors.New("control socket: " + err.Error())
	}
	return &box{conn: conn, exe: exe, leaders: leaders{byID: map[uint64]*leader{}}}, nil
}

// serve handles dsh's messages until the connection ends.
func (s *box) serve() error {
	for {
		payload, fds, err := s.conn.Recv()
		if err != nil {
			s.shutdown()
			if err == ErrClosed {
				return nil
			}
			return errors.New("control connection: " + err.Error())
		}
		if err := s.handle(payload, fds); err != nil {
			s.shutdown()
			return err
		}
	}
}

// handle handles one message: a Start, a Release or a Check; anything else ends the box.
func (s *box) handle(payload []byte, fds []int) error {
	if len(payload) == 0 {
		closeFDs(fds)
		return nil
	}
	switch payload[0] {
	case MsgStart:
		m, err := DecodeStart(payload)
		if err != nil {
			closeFDs(fds)
			return err
		}
		s.start(m, fds)
	case MsgRelease:
		closeFDs(fds)
		m, err := DecodeRelease(payload)
		if err != nil {
			return err
		}
		s.release(m.ID)
	case MsgCheck:
		closeFDs(fds)
		m, err := DecodeCheck(payload)
		if err != nil {
			return err
		}
		s.check(m)
	default:
		closeFDs(fds)
		return errors.New("unexpected control message type " + strconv.Itoa(int(payload[0])))
	}
	return nil
}

// setup builds the box from the Setup message (payload, with its descriptors fds): the
// mount tree and the network in the namespaces, then what every command inherits.
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
	s.ns, s.network, s.hold = m.Namespaces, m.Network, m.Hold
	wsfd, spillfd, err := s.setupFDs(&m, fds)
	if err != nil {
		return err
	}
	if spillfd >= 0 {
		defer syscall.Close(spillfd) // only its mount stays
	}
	if err := s.build(&m, wsfd, spillfd); err != nil {
		return err
	}
	return s.prepareCommands()
}

// setupFDs takes the Setup's descriptors: the pinned workspace (kept, for the commands'
// rulesets) and the session's spill directory; -1 for none.
func (s *box) setupFDs(m *Setup, fds []int) (wsfd, spillfd int, err error) {
	s.rulesets.pinned = map[string]int{}
	want := 0
	if m.Workspace != "" {
		want++
	}
	if m.Spill != "" {
		want++
	}
	if len(fds) != want {
		closeFDs(fds)
		return -1, -1, errors.New("the setup has " + strconv.Itoa(len(fds)) + " descriptors, want " + strconv.Itoa(want) + " (the pinned workspace, the spill directory)")
	}
	wsfd, spillfd = -1, -1
	if m.Workspace != "" {
		wsfd = fds[0]
		s.rulesets.pinned[m.Workspace] = wsfd
		fds = fds[1:]
	}
	if m.Spill != "" {
		spillfd = fds[0]
	}
	return wsfd, spillfd, nil
}

// build builds the box's world: in the namespaces, it applies the Setup's plan (its
// mount tree, its loopback, its masked and protected paths); without them, it only
// makes the box the subreaper of the commands' orphans.
func (s *box) build(m *Setup, wsfd, spillfd int) error {
	if !s.ns {
		if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetSubreaper, 1, 0, 0, 0, 0); e != 0 {
			// Orphaned descendants of the commands come here, to be reaped.
			return errors.New("prctl(PR_SET_CHILD_SUBREAPER): " + e.Error())
		}
		return nil
	}
	s.roots = writableRoots(m)
	s.mounts = newMounts(map[pinnedDir]int{pinnedWorkspace: wsfd, pinnedSpill: spillfd})
	if err := s.mounts.apply(setupPlan(m)); err != nil {
		return err
	}
	return syscall.Chdir("/")
}

// prepareCommands readies what every command inherits or starts from: the capability
// facts, the seccomp filter, the spare threads.
func (s *box) prepareCommands() error {
	dropCaps, lastCap := holdsCap(capSetpcap), lastCapability()
	if SeccompSupported {
		// The filter is the same for every command of the session: installed once, on
		// every thread of this process (which makes no socket of its own from now on
		// and uses no keyring), it is inherited by each command thread and its fork —
		// compiling a filter per command would cost more than the rest of the
		// confinement.
		if err := filterProcess(commandFilter(filterArches, s.network == NetworkDeny, !s.ns, !s.hold)); err != nil {
			return errors.New("seccomp: " + err.Error())
		}
	}
	s.threads = newThreads(dropCaps, lastCap)
	return nil
}

const capSetpcap = 8

// start starts one command (it runs in its own goroutine) and answers Started or
// Failed. fds are stdin, stdout, stderr, when m.Cgroup the cgroup directory, then
// m.CgroupV1 tasks files.
func (s *box) start(m Start, fds []int) {
	m.master = -1
	if r, ok := s.admit(m, fds); !ok {
		s.failed(m.ID, r)
		closeFDs(fds)
		return
	}
	if m.Terminal {
		var err error
		if fds, err = s.withTerminal(&m, fds); err != nil {
			s.failed(m.ID, Reply{Message: "start: " + err.Error()})
			closeFDs(fds)
			return
		}
	}
	rs, flags, rerr := s.rulesets.get(m.Policy)
	s.leaders.begin()
	s.threads.run(func(prepared error) {
		// This goroutine's thread is confined, forks the command, answers, and dies.
		err := prepared
		if err == nil {
			err = rerr
		}
		s.fork(m, fds, err, rs, flags)
	})
}

// admit checks a start against the box — its descriptors, its policy — and makes the
// paths that must be protected or masked before it so; else it returns the Failed
// reply.
func (s *box) admit(m Start, fds []int) (Reply, bool) {
	want := 3
	switch {
	case m.Terminal && (m.Cols < 1 || m.Cols > 65535 || m.Rows < 1 || m.Rows > 65535):
		return Reply{Message: "start: invalid terminal size " + strconv.Itoa(m.Cols) + "x" + strconv.Itoa(m.Rows)}, false
	case m.Terminal:
		want = 0 // the box allocates the terminal, the command's stdio
	}
	if m.Cgroup {
		want++
	}
	if m.CgroupV1 < 0 || m.CgroupV1 > maxFrameFDs {
		return Reply{Message: "start: " + strconv.Itoa(m.CgroupV1) + " cgroup v1 descriptors"}, false
	}
	want += m.CgroupV1
	if len(fds) != want {
		return Reply{Message: "start: expected " + strconv.Itoa(want) + " descriptors, got " + strconv.Itoa(len(fds))}, false
	}
	if m.Policy.Network != s.network {
		return Reply{Message: "start: the command's network policy " + strconv.Quote(m.Policy.Network) + " is not the sandbox's " + strconv.Quote(s.network)}, false
	}
	if err := m.Policy.Validate(); err != nil {
		return Reply{Message: "start: " + err.Error()}, false
	}
	if s.ns && len(m.MaskDirs)+len(m.Protect)+len(m.MaskFiles) > 0 {
		s.pmu.Lock()
		err := s.mounts.apply(updatePlan(s.roots, m.MaskDirs, m.Protect, m.MaskFiles))
		s.pmu.Unlock()
		if err != nil {
			return Reply{Message: err.Error()}, false
		}
	}
	return Reply{}, true
}

// failed answers start id with the Failed reply r.
func (s *box) failed(id uint64, r Reply) {
	r.Type, r.ID = MsgFailed, id
	s.conn.Send(r.Encode())
}

// fork runs on a prepared thread: it confines the thread to the ruleset rs (unless
// confining already failed with err), forks the command — or, when it cannot be
// confined, the launcher's failure mode in its place — puts it in its cgroup, and
// answers (started).
func (s *box) fork(m Start, fds []int, err error, rs int, flags uint32) {
	defer closeFDs(fds)
	if err == nil {
		err = joinCgroupsV1(fds[len(fds)-m.CgroupV1:])
	}
	pidfd := -1
	// Under a terminal, its slave (fd 0) is the controlling terminal of the session the
	// command leads.
	sys := &syscall.SysProcAttr{Setsid: true, Setctty: m.Terminal, PidFD: &pidfd}
	attr := &syscall.ProcAttr{Dir: m.Dir, Env: m.Env, Files: []uintptr{uintptr(fds[0]), uintptr(fds[1]), uintptr(fds[2])}, Sys: sys}
	cg := cgroupPlacement{procs: -1}
	if m.Cgroup {
		// Readied before the thread is confined: Landlock would refuse the open after.
		var perr error
		cg, perr = s.placement(fds[3], sys)
		defer cg.close()
		if err == nil {
			err = perr
		}
	}
	if err == nil {
		err = restrictThread(rs, flags)
	}
	var f forked
	if err != nil {
		f.confined = err
		failure := &syscall.ProcAttr{Files: attr.Files, Sys: sys}
		f.pid, f.err = syscall.ForkExec("/proc/self/fd/"+strconv.Itoa(s.exe), []string{"dsh-sandbox", FailArg, "confine the command: " + err.Error()}, failure)
	} else {
		f.pid, f.err = syscall.ForkExec(m.Path, m.Argv, attr)
	}
	if f.err == nil {
		if perr := cg.place(f.pid); perr != nil {
			discard(f.pid, pidfd)
			f.err, f.placing, pidfd = perr, perr, -1
		}
	}
	s.started(m, f, pidfd)
}

// joinCgroupsV1 moves the calling thread (which dies after the fork) into the cgroups
// whose tasks files are tasks: what it forks starts there.
func joinCgroupsV1(tasks []int) error {
	for _, fd := range tasks {
		if _, err := syscall.Write(fd, []byte("0")); err != nil {
			return errors.New("join the command's cgroup: " + err.Error())
		}
	}
	return nil
}

// oomFirst raises this process's OOM score to the most (what it forks inherits it).
func oomFirst() {
	if fd, err := syscall.Open("/proc/self/oom_score_adj", syscall.O_WRONLY|syscall.O_CLOEXEC, 0); err == nil {
		syscall.Write(fd, []byte("1000"))
		syscall.Close(fd)
	}
}

// forked is how a start's fork went.
type forked struct {
	pid      int
	err      error
	confined error // why confinement failed: the launcher's failure mode ran instead
	placing  error // why the forked child could not be put in its cgroup (it was killed)
}

// started registers the leader of a start that forked and answers Started (or Failed).
func (s *box) started(m Start, f forked, pidfd int) {
	if m.master >= 0 {
		defer syscall.Close(m.master) // dsh has its own copy once the reply is sent
	}
	if f.err != nil {
		s.leaders.abort()
		s.failed(m.ID, forkFailure(m, f))
		return
	}
	_ = syscall.SetNonblock(pidfd, true) // if it fails, await blocks a thread instead
	l := &leader{id: m.ID, pid: f.pid, pidfd: os.NewFile(uintptr(pidfd), "pidfd")}
	s.leaders.add(l)

	dup, err := dupCloexec(pidfd)
	if err != nil {
		// The leader runs; dsh learns its pid from the reply's descriptor only.
		s.failed(m.ID, Reply{Message: "duplicate the pidfd: " + err.Error()})
		syscall.Kill(-f.pid, syscall.SIGKILL)
		s.leaders.release(l.id) // dsh never will: reaped when it exits
		go s.await(l)
		return
	}
	sent := []int{dup}
	if m.master >= 0 {
		sent = append(sent, m.master)
	}
	s.conn.Send((&Reply{Type: MsgStarted, ID: m.ID, Pid: f.pid, LaunchFailed: f.confined != nil}).Encode(), sent...)
	syscall.Close(dup)
	go s.await(l)
}

// forkFailure is the Failed reply to a start whose fork failed: the exec's errno, or
// the working directory's when that is what is wrong with it.
func forkFailure(m Start, f forked) Reply {
	if f.placing != nil {
		return Reply{Message: f.placing.Error()}
	}
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

// await waits for l's exit without reaping it and reports it (Exited).
func (s *box) await(l *leader) {
	code, sig, _ := AwaitExit(l.pid, l.pidfd)
	released := s.leaders.exited(l)
	s.conn.Send((&Reply{Type: MsgExited, ID: l.id, Code: code, Signal: sig}).Encode())
	if released {
		s.leaders.release(l.id)
	}
	s.leaders.scanLater()
}

// release reaps the leader of command id (dsh is done signalling its group).
func (s *box) release(id uint64) { s.leaders.release(id) }

// shutdown ends what is left when dsh is gone. In the namespaces returning is enough:
// the PID namespace dies with its init. Without them, each leader's group is killed.
func (s *box) shutdown() {
	if !s.ns {
		s.leaders.killAll()
	}
}
