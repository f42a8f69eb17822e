package subprocess

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/proc"
)

// Sentinel causes the Supervisor records in proc.Exit.Cause.
var (
	ErrTimedOut = errors.New("subprocess: deadline exceeded")
	ErrKilled   = errors.New("subprocess: killed")
	ErrDisposed = errors.New("subprocess: service disposed")
)

// Process is one spawned process tree and its captured output. All methods are safe for
// concurrent use.
type Process struct {
	sup   *Supervisor
	id    uint64
	pid   int
	pidfd int // -1 when the kernel has no pidfds: the leader is reaped with wait4
	// started, when set, is the leader a Spec.Start started: its exit and its reaping
	// come from there.
	started proc.Started
	note    string // appended to stderr when the process settles (a lost leader)
	grace   time.Duration
	owner   string // Spec.Owner: the session EndOwner ends the tree with
	// endWithLeader: what the tree holds when the leader exits is killed (Spec.EndWithLeader).
	endWithLeader bool
	hosts         bool           // Spec.Hosts: EndOwner leaves it to its hooks
	cg            *cgroup        // nil when the tree is tracked by its process group only
	cgRoot        *cgroupRoot    // where cg returns when the tree is gone
	bud           *budgetCgroups // the cgroups of its resource limits; nil for none
	// goneAtSettle: nothing was left in cg when a tree with limits settled.
	goneAtSettle bool
	// watchdog knows the group (cgroup-less trees only) until the leader is reaped.
	watchdog *watchdogProc

	stdout, stderr *proc.Stream
	rOut, rErr     *os.File // parent ends of the output pipes
	wIn            *os.File // parent end of the stdin pipe, or nil
	stdin          []byte
	tty            *terminal // the terminal the tree runs under (Spec.Terminal), or nil; its master is rOut

	readers   sync.WaitGroup
	stdinDone chan struct{}
	retired   chan struct{} // closed once retire has run

	// tear is the process's life: kill → escalate → drain → settle (see proc.Teardown).
	tear proc.Teardown

	// sigMu orders every signal to the tree with the leader's release and the cgroup's
	// recycling: the group is signalled by number only while the leader is an unreaped
	// zombie (which keeps the id from being reused), the cgroup only while it is ours.
	sigMu    sync.Mutex
	reaped   bool // the leader was reaped (here or, wrongly, elsewhere): its id may be reused
	cgFreed  bool // the cgroup was recycled or removed
	termSent bool // the tree got its SIGTERM
}

// Pid is the leader's process id; it is also the id of the process group and session
// the tree runs in. The Supervisor reaps the leader itself, late (see release): nothing
// else may wait for it.
func (p *Process) Pid() int { return p.pid }

// Stdout is the captured standard output.
func (p *Process) Stdout() *proc.Stream { return p.stdout }

// Stderr is the captured standard error.
func (p *Process) Stderr() *proc.Stream { return p.stderr }

// Done is closed when the process has settled: the leader exited, the output pipes
// reached EOF or the drain bound (graceMs after the leader's exit) passed, and, if the
// tree was being killed, the tree is gone or the SIGKILL escalation ran. A killed tree
// settles promptly once nothing is left of it (within a few milliseconds in cgroup
// mode, within 50 ms in process-group mode), never waiting out graceMs for nothing. A
// killed tree's leader is reaped by then. Closing the pipes and, in cgroup mode, reaping
// the leader of a tree that left nothing behind follow right after Done, so that whoever
// waits on Done is not held up by them. Any other leader (a `cmd &` left running; in
// process-group mode every tree that was not killed) stays a zombie until a sweep of
// the Supervisor finds its tree empty (the first within a fraction of a second), so
// that the group id cannot be reused while the Supervisor may still signal it.
func (p *Process) Done() <-chan struct{} { return p.tear.Done() }

// Exit returns how the process ended, and false while it has not settled.
func (p *Process) Exit() (proc.Exit, bool) { return p.tear.Exit() }

// State reports Running until the process has settled, then Completed or Killed.
func (p *Process) State() proc.State { return p.tear.State() }

// Kill ends the tree: SIGTERM now — to every process of the cgroup in cgroup mode, to
// the process group otherwise; each process gets it once — then, after the grace
// period, SIGKILL to the whole cgroup (cgroup.kill) and the group if anything is left.
// It returns false once the process has settled; calling it again is harmless. If the
// leader already exited by itself, Kill still ends what is left of its tree but the
// exit status stays the leader's own.
func (p *Process) Kill() bool {
	p.noticeExit()
	return p.tear.Kill(proc.ReasonKill, ErrKilled, true)
}

// tree is the Process as its teardown reaches it (a proc.Tree): by signals to its
// cgroup and process group, and by read deadlines on its output pipes.
type tree Process

func (t *tree) Terminate() { (*Process)(t).signal(syscall.SIGTERM) }

// Escalate SIGKILLs whatever is left of the tree, even when the leader already exited:
// the group and the cgroup may still have members.
func (t *tree) Escalate() { (*Process)(t).signal(syscall.SIGKILL) }

func (t *tree) AwaitGone(escalateAt time.Time, escalated <-chan struct{}) bool {
	return (*Process)(t).awaitTreeGone(escalateAt, escalated)
}

// Cut ends the drain: the pipes' reads stop at once (a read deadline in the past).
func (t *tree) Cut() {
	now := time.Now()
	for _, f := range [...]*os.File{t.rOut, t.rErr} {
		if f == nil {
			continue // a terminal has one output
		}
		if f.SetReadDeadline(now) != nil {
			_ = f.Close() // not pollable: closing is the only way to stop the read
		}
	}
}

// signal sends sig to the tree. In cgroup mode that is every process of the cgroup,
// which holds the whole tree, members that left the group (setsid daemons) included;
// SIGKILL goes through cgroup.kill (and to the group too). Otherwise it goes to the
// process group by number. A process gets at most one SIGTERM per teardown: the first
// SIGTERM to the tree is its only one. Once the leader is reaped the group is no longer
// signalled (its id may belong to an unrelated process by then), and once the cgroup is
// recycled neither is the cgroup (it may serve another command).
func (p *Process) signal(sig syscall.Signal) {
	p.sigMu.Lock()
	defer p.sigMu.Unlock()
	if sig == syscall.SIGTERM {
		if p.termSent {
			return
		}
		p.termSent = true
	}
	if p.cg != nil && !p.cgFreed {
		if sig == syscall.SIGKILL {
			p.cg.kill()
		} else if signalCgroup(p.cg.path, sig) {
			return
		}
	} else if p.cg == nil && p.bud != nil {
		// Its cgroup v1 directories hold the tree, members that left the group too.
		if dir := p.bud.signalDir(); dir != "" && signalCgroupProcs(dir, sig) && sig == syscall.SIGTERM {
			return
		}
	}
	if !p.reaped && p.pid > 1 { // kill(0) and kill(-1) would reach far more than a tree
		_ = syscall.Kill(-p.pid, sig)
	}
}

// freeCgroup recycles (or removes) the emptied cgroup; no signal reaches it afterwards.
func (p *Process) freeCgroup() {
	p.sigMu.Lock()
	p.cgFreed = true
	p.sigMu.Unlock()
	p.cgRoot.put(p.cg)
}

// treeAlive reports whether any process of the tree (other than zombies) is left.
func (p *Process) treeAlive() bool {
	if p.cg != nil {
		return p.cg.populated()
	}
	return groupAlive(p.pid)
}

// awaitTreeGone waits until no process of the tree (other than zombies) is left, and
// reports true then; it gives up, reporting false, at escalateAt or once escalated is
// closed (nil: never). A cgroup says when it empties (cgroup.events changes, seen
// through inotify in the runtime's poller); a process group does not, so it is looked
// at again after 1, 2, 4… up to 50 ms. A member that has closed its pipes may still be
// exiting, so a single look right after the pipes' EOF is not enough.
func (p *Process) awaitTreeGone(escalateAt time.Time, escalated <-chan struct{}) bool {
	if p.cg != nil {
		if gone, ok := awaitCgroupEmpty(p.cg.path, escalateAt); ok {
			return gone
		}
	}
	delay := time.Millisecond
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		if !p.treeAlive() {
			return true
		}
		if !time.Now().Before(escalateAt) {
			return false
		}
		t.Reset(min(delay, time.Until(escalateAt)))
		select {
		case <-escalated:
			return false
		case <-t.C:
		}
		delay = min(2*delay, maxTreePoll)
	}
}

// maxTreePoll is the longest interval between two looks at a dying process group.
const maxTreePoll = 50 * time.Millisecond

// readLoop copies one pipe into its stream until EOF, or until the drain deadline
// passes; then whatever the pipe still buffers is taken without waiting, so that a
// reader scheduled late never loses bytes the command wrote before it exited.
func (p *Process) readLoop(f *os.File, s *proc.Stream) {
	defer p.readers.Done()
	// Start with a small buffer; a stream that fills it gets the large one, and one that
	// keeps filling that (bulkAfter reads in a row) gets a bulk buffer and a pipe as
	// large. Hundreds of quiet processes then cost little, and bulk output moves in big
	// reads: fewer wake-ups of the producer and of this reader, and of each read only
	// the last MaxBytes reach the tail ring.
	pool := &smallBuffers
	bp := pool.Get().(*[]byte)
	defer func() {
		pool.Put(bp)
		if pool == &bulkBuffers {
			<-bulkSlots
		}
	}()
	full := 0 // consecutive reads that filled a large buffer
	for {
		buf := *bp
		n, err := p.read(f, buf)
		if n > 0 {
			s.Write(buf[:n])
			p.written(f)
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				drainBuffered(f, s, buf)
			}
			return
		}
		switch {
		case n < len(buf):
			full = 0
		case pool == &smallBuffers:
			pool.Put(bp)
			pool = &largeBuffers
			bp = pool.Get().(*[]byte)
		case pool == &largeBuffers:
			if full++; full >= bulkAfter && takeBulkSlot() {
				// A bulk producer: a larger pipe and reads as large mean fewer
				// wake-ups on both sides, and most bytes never reach the tail ring.
				growPipe(f)
				pool.Put(bp)
				pool = &bulkBuffers
				bp = pool.Get().(*[]byte)
			}
		}
	}
}

// bulkAfter is how many consecutive full large reads make a stream bulk.
const bulkAfter = 16

// growPipe asks for a bulk-sized pipe buffer; refused (a user over its pipe quota, an
// old kernel), the pipe stays as it is.
func growPipe(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, bulkBufferSize)
	})
}

// maxFinalDrain bounds the final non-blocking drain: an orphan that keeps writing
// cannot keep the reader busy.
const maxFinalDrain = 1 << 20

// drainBuffered reads what the pipe holds right now, without blocking.
func drainBuffered(f *os.File, s *proc.Stream, buf []byte) {
	if f.SetReadDeadline(time.Time{}) != nil {
		return
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	for total := 0; total < maxFinalDrain; {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			for {
				n, rerr = syscall.Read(int(fd), buf)
				if rerr != syscall.EINTR {
					return true
				}
			}
		}); err != nil || rerr != nil || n <= 0 {
			return
		}
		s.Write(buf[:n])
		total += n
	}
}

const bulkBufferSize = 1 << 20

// maxBulkStreams bounds the streams that read through a bulk buffer at once: the
// harness's own read buffers stay below maxBulkStreams MiB (plus 64 kB a stream)
// however many commands stream output at once; the others read through large buffers.
const maxBulkStreams = 8

// bulkSlots holds a token for each stream reading through a bulk buffer.
var bulkSlots = make(chan struct{}, maxBulkStreams)

func takeBulkSlot() bool {
	select {
	case bulkSlots <- struct{}{}:
		return true
	default:
		return false
	}
}

// Read buffers: every stream reads through one fixed buffer, small at first.
var (
	smallBuffers = sync.Pool{New: func() any { b := make([]byte, 4<<10); return &b }}
	largeBuffers = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}
	bulkBuffers  = sync.Pool{New: func() any { b := make([]byte, bulkBufferSize); return &b }}
)

func (p *Process) writeStdin() {
	defer close(p.stdinDone)
	_, _ = p.wIn.Write(p.stdin)
	_ = p.wIn.Close()
}

// beforeExitReport, when set (by tests), runs in a waiter between its leader's exit
// and its report to the teardown.
var beforeExitReport atomic.Pointer[func()]

// wait settles the process once its leader exited. It runs in its own goroutine.
func (p *Process) wait() {
	ex := p.awaitExit()
	if hook := beforeExitReport.Load(); hook != nil {
		(*hook)()
	}
	p.tear.Exited(ex)
	if p.endWithLeader {
		p.endLeftovers()
	}
	if p.wIn != nil {
		_ = p.wIn.Close()
	}
	// The pipes reach EOF, or the drain bound cuts them (tree.Cut): an orphan holding
	// them cannot keep the call open.
	p.readers.Wait()
	p.closeStreams()
	killing := p.tear.Settling().Killing()
	// A killed tree settles as soon as it is gone, or else once the SIGKILL escalation
	// has run.
	p.tear.AwaitKill()
	if killing {
		p.release() // before Done, as promised there
	}
	if p.bud != nil {
		// A tree seen gone stays gone (nothing joins a used cgroup): retire need not
		// look again, and the counters read now are final.
		p.goneAtSettle = p.cg != nil && !p.cg.populated()
		b := p.bud.account(p.cg, p.goneAtSettle)
		p.tear.Account(b)
		p.endRunaway(b)
	}
	p.tear.Settle(nil)
	// Whoever waited for the result goes first: on one processor, the response to a
	// tool call is written before the pipes are closed and the leader reaped below.
	runtime.Gosched()
	p.retire(killing)
	close(p.retired)
}

// endRunaway kills what is left of a tree that reached a process limit once its leader
// has exited: a runaway its leader left behind (a fork bomb sent to the background)
// would hold its session's budget, and no deadline reaches it any more. The exit stays
// the leader's own.
//
// It returns once the tree's processes are gone and released (reaped: until then they
// still count against the limit), or after the grace period: the next command of the
// session finds its budget free.
func (p *Process) endRunaway(b *proc.Budget) {
	for _, h := range b.Hits {
		if (h.Limit == proc.LimitProcesses || h.Limit == proc.LimitSessionProcesses) && p.treeAlive() {
			p.signal(syscall.SIGKILL)
			deadline := time.Now().Add(p.grace)
			timeout := make(chan struct{})
			stop := time.AfterFunc(p.grace, func() { close(timeout) })
			p.awaitTreeGone(deadline, timeout)
			stop.Stop()
			p.bud.awaitReleased(deadline)
			return
		}
	}
}

// closeStreams ends the captured output: the note of a lost leader is its last line,
// and from now on the budget may delete the spill files to make room for newer output.
func (p *Process) closeStreams() {
	if p.note != "" {
		last := p.stderr // a terminal's one stream is stdout
		if p.tty != nil {
			last = p.stdout
		}
		note := p.note
		if t := last.Output().Text; t != "" && !strings.HasSuffix(t, "\n") {
			note = "\n" + note
		}
		_, _ = last.Write([]byte(note))
	}
	p.stdout.Close()
	p.stderr.Close()
	if p.stdinDone != nil {
		<-p.stdinDone
	}
}

// retire releases what a settled process still holds. Its pipes are closed. Its leader
// is reaped now unless the Supervisor may still signal its group: a tree that may live
// on is remembered, and ended at Close. (A killed tree's leader was reaped at settling,
// and its group is not signalled again; a cgroup, which still holds what is dying, may
// be.) A cgroup tells at once whether anything is left; a process group does not (with
// the zombie leader in it, kill(-pgid, 0) always succeeds and only a scan of /proc
// tells), so such a tree is handed to the Supervisor, whose sweep scans once for all of
// them and reaps the leaders of the empty ones.
func (p *Process) retire(killing bool) {
	_ = p.rOut.Close()
	if p.rErr != nil {
		_ = p.rErr.Close()
	}
	lingering := false
	switch {
	case p.cg != nil:
		lingering = !p.goneAtSettle && p.cg.populated()
	case !killing:
		lingering = true
	}
	if !killing && !lingering {
		p.release()
	}
	if p.cg != nil {
		if lingering {
			p.cg.closeFD()
		} else {
			p.freeCgroup()
		}
	}
	if !lingering {
		p.bud.remove()
	}
	p.sup.forget(p, lingering)
}
