package bashsandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/plugins/bashsandbox/internal/launch"
	"github.com/dsh-dev/dsh/proc"
)

// cmdStarter starts one command in a box (a proc.Starter).
type cmdStarter struct {
	box       *box
	policy    launch.Policy
	protect   []string
	maskFiles []string
	maskDirs  []string
	// launchFailed: the box could not confine the command and started the launcher's
	// failure mode in its place (only then is a "dsh-sandbox:" line a launcher failure).
	launchFailed atomic.Bool
}

// boxCmd is a command started in a box (a proc.Started; a proc.TerminalStarted under a
// terminal).
type boxCmd struct {
	box    *box
	id     uint64
	pid    int
	exit   chan proc.Exit
	once   sync.Once
	master *os.File // the terminal the box allocated for the command, until Master takes it
	// pidfd is the leader's (nil if it cannot be polled): it tells when the leader
	// exited, which the box must report within grace.
	pidfd *os.File
	grace time.Duration
}

// Start asks the box to start req confined to the starter's policy. The leader's
// host pid comes from its pidfd (the box sees it under its own PID namespace). A box
// that has not answered by the call's deadline (or abort) plus the grace period, or
// within answerLimit in any case, is wedged: killed, and the call fails saying so.
func (st *cmdStarter) Start(req proc.StartRequest) (proc.Started, error) {
	b := st.box
	id, reply, exit, err := b.register()
	if err != nil {
		return nil, &proc.SpawnError{Op: "sandbox", Err: err}
	}
	grace := graceOf(req)
	stop := b.watchAnswer(req.Deadline, req.Abort, grace)
	defer stop()
	m, fds := st.message(id, req)
	if err := b.conn.Send(m.Encode(), fds...); err != nil {
		b.forget(id)
		if b.failure() != errClosed { // the box was lost, or wedged, meanwhile
			return nil, &proc.SpawnError{Op: "sandbox", Err: b.failure()}
		}
		b.fail()
		return nil, &proc.SpawnError{Op: "sandbox", Err: fmt.Errorf("send the command to the session sandbox: %w", err)}
	}
	rep, ok := <-reply
	if !ok {
		b.forget(id)
		return nil, &proc.SpawnError{Op: "sandbox", Err: b.failure()}
	}
	pid, pidfd, master, err := st.started(id, rep, req.Terminal != nil)
	if err != nil {
		return nil, err
	}
	return &boxCmd{box: b, id: id, pid: pid, exit: exit, master: master, pidfd: pidfd, grace: grace}, nil
}

// graceOf is the grace period a start request gives the box.
func graceOf(req proc.StartRequest) time.Duration {
	if req.Grace > 0 {
		return req.Grace
	}
	return defaultGrace
}

// defaultGrace is the box's grace period for a request that names none.
const defaultGrace = 3 * time.Second

// answerLimit bounds the wait for a box's answer to a start whatever the call's
// deadline (a background job has none).
const answerLimit = 30 * time.Second

// watchAnswer wedges b unless the returned stop is called first: by the deadline or
// the abort, then the grace period more, or at answerLimit. (A zero deadline and a nil
// abort never come.)
func (b *box) watchAnswer(deadline time.Time, abort <-chan struct{}, grace time.Duration) (stop func()) {
	answered := make(chan struct{})
	start := time.Now()
	go func() {
		limit := time.NewTimer(answerLimit)
		defer limit.Stop()
		var due <-chan time.Time
		if !deadline.IsZero() {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop()
			due = t.C
		}
		select {
		case <-answered:
			return
		case <-limit.C:
			b.wedged(time.Since(start))
			return
		case <-due:
		case <-abort:
		}
		more := time.NewTimer(grace)
		defer more.Stop()
		select {
		case <-answered:
		case <-limit.C:
			b.wedged(time.Since(start))
		case <-more.C:
			b.wedged(time.Since(start))
		}
	}()
	return func() { close(answered) }
}

// message is the Start message for req, with its descriptors: stdin, stdout, stderr
// (none under a terminal: the box allocates it), the command's cgroup when it has one,
// and the tasks files of its cgroup v1 directories (the box's thread that forks it
// joins them).
func (st *cmdStarter) message(id uint64, req proc.StartRequest) (launch.Start, []int) {
	m := launch.Start{
		ID:        id,
		Policy:    st.policy,
		Path:      req.Path,
		Argv:      req.Argv,
		Dir:       req.Dir,
		Env:       req.Env,
		Protect:   st.protect,
		MaskFiles: st.maskFiles,
		MaskDirs:  st.maskDirs,
		Cgroup:    req.CgroupFD >= 0,
		CgroupV1:  len(req.CgroupV1),
	}
	var fds []int
	if t := req.Terminal; t != nil {
		m.Terminal, m.Cols, m.Rows = true, t.Cols, t.Rows
	} else {
		fds = []int{int(req.Files[0].Fd()), int(req.Files[1].Fd()), int(req.Files[2].Fd())}
	}
	if req.CgroupFD >= 0 {
		fds = append(fds, req.CgroupFD)
	}
	for _, f := range req.CgroupV1 {
		fds = append(fds, int(f.Fd()))
	}
	return m, fds
}

// started reads the box's answer to start id: the leader's host pid, from the pidfd
// that came with it (kept, to see the leader exit), and, under a terminal, the
// terminal's master that came after it; or why the command did not start (the id is
// then forgotten).
func (st *cmdStarter) started(id uint64, rep boxReply, terminal bool) (int, *os.File, *os.File, error) {
	b := st.box
	if rep.r.Type == launch.MsgFailed {
		closeAll(rep.fds)
		b.forget(id)
		r := rep.r
		if r.Errno != 0 {
			return 0, nil, nil, &proc.SpawnError{Op: r.Op, Path: r.Path, Err: syscall.Errno(r.Errno)}
		}
		return 0, nil, nil, &proc.SpawnError{Op: "sandbox", Err: errors.New(r.Message)}
	}
	want := 1
	if terminal {
		want = 2
	}
	if len(rep.fds) != want {
		closeAll(rep.fds)
		b.forget(id)
		what := "no pidfd"
		if terminal {
			what = "no pidfd and terminal"
		}
		return 0, nil, nil, &proc.SpawnError{Op: "sandbox", Err: errors.New("the session sandbox sent " + what)}
	}
	st.launchFailed.Store(rep.r.LaunchFailed)
	pid, err := pidfdPid(rep.fds[0])
	if err != nil {
		// It runs, and cannot be signalled by host pid: end it through its box.
		closeAll(rep.fds)
		b.forget(id)
		b.fail()
		return 0, nil, nil, &proc.SpawnError{Op: "sandbox", Err: err}
	}
	pidfd := pollable(rep.fds[0])
	if !terminal {
		return pid, pidfd, nil, nil
	}
	return pid, pidfd, terminalMaster(rep.fds[1]), nil
}

// pollable is the pidfd fd as a file the runtime's poller watches (it turns readable
// when the process exits), or nil — closing fd — when it cannot be.
func pollable(fd int) *os.File {
	if syscall.SetNonblock(fd, true) != nil {
		syscall.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), "pidfd")
}

// terminalMaster is the master the box sent, non-blocking so that reads wait on the
// runtime's poller and a deadline can cut them. (The Supervisor checks that it is a
// terminal's master.)
func terminalMaster(fd int) *os.File {
	_ = syscall.SetNonblock(fd, true)
	return os.NewFile(uintptr(fd), "ptmx")
}

// Master hands over the terminal the box allocated (nil without one).
func (c *boxCmd) Master() *os.File {
	m := c.master
	c.master = nil
	return m
}

func (c *boxCmd) Pid() int { return c.pid }

// Wait returns the leader's exit as the box reported it, or the box's failure. Once the
// leader's pidfd says it exited, the box has the grace period to report it; a box that
// does not is wedged (killed, the failure saying so).
func (c *boxCmd) Wait() (proc.Exit, error) {
	gone := exited(c.pidfd)
	defer c.closePidfd()
	select {
	case st, ok := <-c.exit:
		return c.reported(st, ok)
	case <-gone:
	}
	t := time.NewTimer(c.grace)
	defer t.Stop()
	select {
	case st, ok := <-c.exit:
		return c.reported(st, ok)
	case <-t.C:
	}
	c.box.wedged(c.grace)
	st, ok := <-c.exit // closed by the wedging, unless the report made it first
	return c.reported(st, ok)
}

func (c *boxCmd) reported(st proc.Exit, ok bool) (proc.Exit, error) {
	if !ok {
		return proc.Exit{}, c.box.failure()
	}
	return st, nil
}

func (c *boxCmd) closePidfd() {
	if c.pidfd != nil {
		c.pidfd.Close()
	}
}

// exited returns a channel closed once pidfd says its process exited; it is never
// closed without a pidfd, or once the pidfd is closed.
func exited(pidfd *os.File) <-chan struct{} {
	ch := make(chan struct{})
	if pidfd == nil {
		return ch
	}
	rc, err := pidfd.SyscallConn()
	if err != nil {
		return ch
	}
	go func() {
		err := rc.Read(func(fd uintptr) bool {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(fds, 0)
			return err == nil && n > 0
		})
		if err == nil {
			close(ch)
		}
	}()
	return ch
}

// Release tells the box to reap the leader.
func (c *boxCmd) Release() { c.once.Do(func() { c.box.release(c.id) }) }

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
