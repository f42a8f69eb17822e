package bashsandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dsh-dev/dsh/plugins/bashsandbox/internal/launch"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
)

// A box is one session sandbox: the dsh binary started once per session (and per
// sandbox configuration) with SessionArg, in new namespaces unless the backend is
// Landlock-only, owned by the Supervisor like any command (its own cgroup in the
// harness's subtree, killed when the Supervisor closes), and talked to over a unix
// socket. Each confined command of the session is started by it, from a thread of its
// own that it confines first; it is the commands' parent, so it reports their exits and
// reaps them when the Supervisor releases them (see cmdStarter).
type box struct {
	conf boxConfig
	proc *subprocess.Process
	conn *launch.Conn

	mu      sync.Mutex
	err     error // why the box is unusable (its connection failed); nil while alive
	nextID  uint64
	waiting map[uint64]chan boxReply // Start requests awaiting their answer
	cmds    map[uint64]*boxCmd       // started commands whose exit is not known yet
	live    int                      // commands started and not yet released
	retired bool                     // no new commands; close when live reaches 0
	closed  bool
}

// boxConfig is what a box is built from: a box serves a call only if its configuration
// is the call's.
type boxConfig struct {
	namespaces bool
	network    string
	workspace  string // pinned root, "" for none
	roots      []string
	hide       []string
}

func (c boxConfig) equal(o boxConfig) bool {
	return c.namespaces == o.namespaces && c.network == o.network && c.workspace == o.workspace &&
		slices.Equal(c.roots, o.roots) && slices.Equal(c.hide, o.hide)
}

type boxReply struct {
	r   launch.Reply
	fds []int
}

// boxSetupTimeout bounds a sandbox's start-up (generous: the host may be busy).
const boxSetupTimeout = 30 * time.Second

// openBox starts a session sandbox on sup: conf, the private temp dir tmp, an empty
// directory stage for its new root, the pinned workspace ws (nil for none), the
// session's spill directory spill at spillPath (nil for none), and the protected paths
// and masked files known now.
func openBox(sup *subprocess.Supervisor, conf boxConfig, tmp, stage string, ws *os.File, spillPath string, spill *os.File, protect, mask []string) (*box, error) {
	if !dispatched.Load() {
		return nil, errNotDispatched
	}
	exe, err := self()
	if err != nil {
		return nil, err
	}
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("bash-sandbox: control socket: %w", err)
	}
	theirs := os.NewFile(uintptr(pair[1]), "dsh-sandbox-control")
	conn, err := launch.NewConn(pair[0])
	if err != nil {
		theirs.Close()
		return nil, fmt.Errorf("bash-sandbox: control socket: %w", err)
	}
	diag := proc.Capture{MaxBytes: 4096}
	proc, err := sup.Spawn(context.Background(), subprocess.Spec{
		Argv:    []string{exe, SessionArg},
		Stdout:  diag,
		Stderr:  diag,
		GraceMs: 2000,
		Start:   &sandboxStarter{namespaces: conf.namespaces, network: conf.network, ctl: theirs},
	})
	theirs.Close()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("bash-sandbox: start the session sandbox: %w", err)
	}
	b := &box{conf: conf, proc: proc, conn: conn, waiting: map[uint64]chan boxReply{}, cmds: map[uint64]*boxCmd{}}
	setup := launch.Setup{
		Namespaces:    conf.namespaces,
		Network:       conf.network,
		Workspace:     conf.workspace,
		WritableRoots: conf.roots,
		TempDir:       tmp,
		Stage:         stage,
		Hide:          conf.hide,
		Protect:       protect,
		Mask:          mask,
	}
	var fds []int
	if ws != nil {
		fds = append(fds, int(ws.Fd()))
	}
	if spill != nil {
		setup.Spill = spillPath
		fds = append(fds, int(spill.Fd()))
	}
	if err := b.handshake(setup.Encode(), fds); err != nil {
		b.kill()
		return nil, err
	}
	go b.read()
	return b, nil
}

// handshake sends the setup and waits for Ready.
func (b *box) handshake(setup []byte, fds []int) error {
	if err := b.conn.Send(setup, fds...); err != nil {
		return b.setupError(fmt.Errorf("send the setup: %w", err))
	}
	type recv struct {
		payload []byte
		fds     []int
		err     error
	}
	got := make(chan recv, 1)
	go func() {
		p, f, err := b.conn.Recv()
		got <- recv{p, f, err}
	}()
	t := time.NewTimer(boxSetupTimeout)
	defer t.Stop()
	var r recv
	select {
	case r = <-got:
	case <-t.C:
		b.conn.Close()
		<-got
		return b.setupError(fmt.Errorf("no answer within %s", boxSetupTimeout))
	}
	closeAll(r.fds)
	if r.err != nil {
		return b.setupError(r.err)
	}
	rep, err := launch.DecodeReply(r.payload)
	switch {
	case err != nil:
		return b.setupError(err)
	case rep.Type == launch.MsgFailed:
		return b.setupError(errors.New(rep.Message))
	case rep.Type != launch.MsgReady:
		return b.setupError(fmt.Errorf("unexpected answer %d to the setup", rep.Type))
	}
	return nil
}

// setupError words a failed start-up, with what the sandbox process wrote to stderr.
func (b *box) setupError(err error) error {
	msg := err.Error()
	if !errors.Is(err, launch.ErrClosed) {
		return fmt.Errorf("bash-sandbox: the session sandbox did not start: %s", msg)
	}
	b.conn.Close()
	select {
	case <-b.proc.Done():
	case <-time.After(5 * time.Second):
	}
	if line := strings.TrimSpace(b.proc.Stderr().Output().Text); line != "" {
		msg = strings.TrimPrefix(line, RunnerFailurePrefix)
	}
	return fmt.Errorf("bash-sandbox: the session sandbox did not start: %s", msg)
}

// read dispatches the sandbox's messages until the connection fails.
func (b *box) read() {
	for {
		payload, fds, err := b.conn.Recv()
		if err != nil {
			b.fail()
			return
		}
		r, err := launch.DecodeReply(payload)
		if err != nil {
			closeAll(fds)
			b.fail()
			return
		}
		b.mu.Lock()
		switch r.Type {
		case launch.MsgStarted, launch.MsgFailed:
			if ch, ok := b.waiting[r.ID]; ok {
				delete(b.waiting, r.ID)
				ch <- boxReply{r, fds}
				fds = nil
			}
		case launch.MsgExited:
			if c, ok := b.cmds[r.ID]; ok {
				delete(b.cmds, r.ID)
				c.exit <- proc.WaitExit(r.Code, syscall.Signal(r.Signal))
			}
		}
		b.mu.Unlock()
		closeAll(fds)
	}
}

// fail marks the box dead: waiting starts fail, and every command whose exit is not
// known yet is lost (in the namespaces it died with the sandbox, the init of its PID
// namespace; without them the Supervisor kills its cgroup).
func (b *box) fail() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return
	}
	if b.closed {
		b.err = errors.New("bash-sandbox: the session sandbox was closed")
	} else {
		b.err = fmt.Errorf("bash-sandbox: the session sandbox (pid %d) ended; the command was killed with it", b.proc.Pid())
	}
	for id, ch := range b.waiting {
		close(ch)
		delete(b.waiting, id)
	}
	for id, c := range b.cmds {
		close(c.exit)
		delete(b.cmds, id)
	}
	b.conn.Close()
}

// usable reports whether the box can start commands.
func (b *box) usable() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err == nil && !b.retired && !b.closed
}

// retire stops new commands; the box closes once its last command is released.
func (b *box) retire() {
	b.mu.Lock()
	b.retired = true
	idle := b.live == 0
	b.mu.Unlock()
	if idle {
		b.close()
	}
}

// close ends the sandbox process: it exits when its connection closes (and the commands
// of its PID namespace with it); the Supervisor kills it if it does not.
func (b *box) close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	b.mu.Unlock()
	b.conn.Close()
	go func() {
		select {
		case <-b.proc.Done():
		case <-time.After(5 * time.Second):
			b.proc.Kill()
		}
	}()
}

// kill ends the sandbox process at once.
func (b *box) kill() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.conn.Close()
	b.proc.Kill()
}

// cmdStarter starts one command in a box (a proc.Starter).
type cmdStarter struct {
	box     *box
	policy  launch.Policy
	protect []string
	mask    []string
	// stub: the sandbox could not confine the command and started the runner-failure
	// stub in its place (only then is a "dsh-sandbox:" line a runner failure).
	stub atomic.Bool
}

// boxCmd is a command started in a box (a proc.Started).
type boxCmd struct {
	box  *box
	id   uint64
	pid  int
	exit chan proc.Exit
	once sync.Once
}

// Start asks the sandbox to start req confined to the starter's policy. The leader's
// host pid comes from its pidfd (the sandbox sees it under its own PID namespace).
func (st *cmdStarter) Start(req proc.StartRequest) (proc.Started, error) {
	b := st.box
	b.mu.Lock()
	if b.err != nil || b.closed {
		err := b.err
		if err == nil {
			err = errors.New("bash-sandbox: the session sandbox was closed")
		}
		b.mu.Unlock()
		return nil, &proc.SpawnError{Op: "sandbox", Err: err}
	}
	b.nextID++
	id := b.nextID
	reply := make(chan boxReply, 1)
	b.waiting[id] = reply
	c := &boxCmd{box: b, id: id, exit: make(chan proc.Exit, 1)}
	b.cmds[id] = c
	b.live++
	b.mu.Unlock()

	m := launch.Start{
		ID:      id,
		Policy:  st.policy,
		Path:    req.Path,
		Argv:    req.Argv,
		Dir:     req.Dir,
		Env:     req.Env,
		Protect: st.protect,
		Mask:    st.mask,
		Cgroup:  req.CgroupFD >= 0,
	}
	fds := []int{int(req.Files[0].Fd()), int(req.Files[1].Fd()), int(req.Files[2].Fd())}
	if req.CgroupFD >= 0 {
		fds = append(fds, req.CgroupFD)
	}
	if err := b.conn.Send(m.Encode(), fds...); err != nil {
		b.forget(id)
		b.fail()
		return nil, &proc.SpawnError{Op: "sandbox", Err: fmt.Errorf("send the command to the session sandbox: %w", err)}
	}
	rep, ok := <-reply
	if !ok {
		b.forget(id)
		return nil, &proc.SpawnError{Op: "sandbox", Err: b.failure()}
	}
	if rep.r.Type == launch.MsgFailed {
		closeAll(rep.fds)
		b.forget(id)
		r := rep.r
		if r.Errno != 0 {
			return nil, &proc.SpawnError{Op: r.Op, Path: r.Path, Err: syscall.Errno(r.Errno)}
		}
		return nil, &proc.SpawnError{Op: "sandbox", Err: errors.New(r.Message)}
	}
	if len(rep.fds) != 1 {
		closeAll(rep.fds)
		b.forget(id)
		return nil, &proc.SpawnError{Op: "sandbox", Err: errors.New("the session sandbox sent no pidfd")}
	}
	st.stub.Store(rep.r.Stub)
	pid, err := pidfdPid(rep.fds[0])
	syscall.Close(rep.fds[0])
	if err != nil {
		// It runs, and cannot be signalled by host pid: end it through its sandbox.
		b.forget(id)
		b.fail()
		return nil, &proc.SpawnError{Op: "sandbox", Err: err}
	}
	c.pid = pid
	return c, nil
}

// forget drops a command that never started (or cannot be followed).
func (b *box) forget(id uint64) {
	b.mu.Lock()
	delete(b.waiting, id)
	delete(b.cmds, id)
	b.live--
	idle := b.retired && b.live == 0
	b.mu.Unlock()
	if idle {
		b.close()
	}
}

func (b *box) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return b.err
	}
	return errors.New("bash-sandbox: the session sandbox was closed")
}

func (c *boxCmd) Pid() int { return c.pid }

// Wait returns the leader's exit as the sandbox reported it, or the box's failure.
func (c *boxCmd) Wait() (proc.Exit, error) {
	st, ok := <-c.exit
	if !ok {
		return proc.Exit{}, c.box.failure()
	}
	return st, nil
}

// Release tells the sandbox to reap the leader.
func (c *boxCmd) Release() {
	c.once.Do(func() {
		b := c.box
		b.mu.Lock()
		alive := b.err == nil && !b.closed
		b.live--
		idle := b.retired && b.live == 0
		b.mu.Unlock()
		if alive {
			_ = b.conn.Send(launch.Release{ID: c.id}.Encode())
		}
		if idle {
			b.close()
		}
	})
}

// pidfdPid reads the pid (in this process's PID namespace) a pidfd refers to.
func pidfdPid(fd int) (int, error) {
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return 0, fmt.Errorf("read the pidfd's fdinfo: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pid:"); ok {
			pid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || pid <= 0 {
				return 0, fmt.Errorf("the pidfd refers to no process visible here (Pid: %s)", strings.TrimSpace(v))
			}
			return pid, nil
		}
	}
	return 0, errors.New("the pidfd's fdinfo has no Pid line")
}

func closeAll(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

// sandboxStarter starts the session sandbox process itself (a proc.Starter): the
// dsh binary as this process's direct child, with the control socket as its fd 3, in
// new user, mount, PID, IPC and UTS namespaces (and a network namespace when the
// network is denied) unless the backend is Landlock-only.
//
// The user namespace maps each id to itself: the sandbox and its commands run as the
// harness's own user, so files keep their owners and nothing runs as a different
// user. As root every id is mapped; otherwise only the harness's own uid and gid can be
// (the kernel allows nothing more without privilege), and the sandbox keeps the
// capabilities it needs to build its mounts (CAP_SYS_ADMIN), bring up its loopback
// (CAP_NET_ADMIN), empty its commands' bounding sets (CAP_SETPCAP) and forbid nested
// user namespaces (CAP_SYS_RESOURCE) as ambient capabilities across the exec — inside
// its own user namespace only. Commands drop every capability before they run.
type sandboxStarter struct {
	namespaces bool
	network    string
	ctl        *os.File
}

// Capabilities (linux/capability.h).
const (
	capSetpcap     = 8
	capNetAdmin    = 12
	capSysAdmin    = 21
	capSysResource = 24
)

func (st *sandboxStarter) Start(req proc.StartRequest) (proc.Started, error) {
	pidfd := -1
	sys := &syscall.SysProcAttr{Setsid: true, PidFD: &pidfd}
	if st.namespaces {
		sys.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
		if st.network == NetworkDeny {
			sys.Cloneflags |= syscall.CLONE_NEWNET
		}
		uid, gid := os.Getuid(), os.Getgid()
		if uid == 0 {
			sys.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1<<32 - 1}}
			sys.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1<<32 - 1}}
			sys.GidMappingsEnableSetgroups = true
		} else {
			sys.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
			sys.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
			sys.AmbientCaps = []uintptr{capSetpcap, capNetAdmin, capSysAdmin, capSysResource}
		}
	}
	if req.CgroupFD >= 0 {
		sys.UseCgroupFD, sys.CgroupFD = true, req.CgroupFD
	}
	attr := &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{},
		Files: []uintptr{req.Files[0].Fd(), req.Files[1].Fd(), req.Files[2].Fd(), st.ctl.Fd()},
		Sys:   sys,
	}
	if st.namespaces && os.Getuid() != 0 {
		// This process is not dumpable (see MaybeRunLauncher), and neither is a child
		// until it execs: its /proc files belong to root, and an unprivileged parent
		// could not write its uid_map and gid_map. Dumpable for the fork only; the
		// sandbox makes itself non-dumpable again first thing.
		dumpable.Lock()
		defer dumpable.Unlock()
		_ = launch.SetDumpable(true)
		defer launch.SetDumpable(false)
	}
	pid, err := syscall.ForkExec(req.Path, req.Argv, attr)
	if err != nil {
		return nil, err
	}
	return &child{pid: pid, pidfd: pidfd}, nil
}

// dumpable serialises the forks that need this process dumpable for a moment.
var dumpable sync.Mutex

// child is a direct child of this process (a proc.Started).
type child struct {
	pid   int
	pidfd int
}

func (c *child) Pid() int { return c.pid }

// Wait waits for the exit without reaping (launch.AwaitExit).
func (c *child) Wait() (proc.Exit, error) {
	var pidfd *os.File
	if c.pidfd >= 0 && syscall.SetNonblock(c.pidfd, true) == nil {
		pidfd = os.NewFile(uintptr(c.pidfd), "pidfd")
		c.pidfd = -1
		defer pidfd.Close()
	}
	code, sig, err := launch.AwaitExit(c.pid, pidfd)
	if err != nil {
		return proc.Exit{}, fmt.Errorf("wait for the session sandbox: %w", err)
	}
	return proc.WaitExit(code, syscall.Signal(sig)), nil
}

// Release reaps the child.
func (c *child) Release() { launch.Reap(c.pid) }
