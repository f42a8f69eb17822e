package subprocess

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/proc"
)

// Service is the name the Supervisor is provided under.
const Service = "subprocess"

// Options configure a Supervisor. The zero value is ready to use.
type Options struct {
	// DisableCgroups forces process-group-only isolation even where cgroup v2 is
	// writable (for tests, or hosts whose cgroup setup must not be touched).
	DisableCgroups bool
	// SpillRoot is the directory in which the Supervisor's Spool creates its private
	// spill directory (default os.TempDir()); see proc.SpoolOptions.Root.
	SpillRoot string
	// SpillBudgetBytes bounds the total size of the spill files (≤ 0 means
	// proc.DefaultSpillBudgetBytes); see proc.SpoolOptions.BudgetBytes.
	SpillBudgetBytes int64
	// Logger receives warnings (default slog.Default()).
	Logger *slog.Logger
	// OnIsolationChange, when set, is called with the new Isolation text if cgroup
	// isolation turns out unusable at spawn time and the Supervisor falls back.
	OnIsolationChange func(isolation string)
	// NoCrashCleanup starts no watchdog (see the package documentation): for a
	// short-lived Supervisor whose processes die with their own parent anyway, which
	// saves the watchdog's start (a few milliseconds).
	NoCrashCleanup bool
}

// Spec describes one process tree to spawn.
type Spec struct {
	// Argv is the program and its arguments. A program name without a slash is looked
	// up in the harness's PATH.
	Argv []string
	// Dir is the working directory ("" = the harness's).
	Dir string
	// Env holds ordinary variables, merged over the scrubbed harness environment and
	// the fixed overrides.
	Env map[string]string
	// DshEnv is the managed DSH_* snapshot, merged last. Every key must start with DSH_.
	DshEnv map[string]string
	// Stdin, when non-nil, is written to the child once and closed; nil means /dev/null.
	Stdin []byte
	// Stdout and Stderr bound the capture of each stream.
	Stdout, Stderr proc.Capture
	// GraceMs is how long a killed tree gets between SIGTERM and SIGKILL, and how long
	// the output pipes may drain after the leader exits (0 < GraceMs ≤ MaxGraceMs).
	GraceMs int64
	// Deadline, when non-zero, kills the tree when it passes (Exit.Reason
	// proc.ReasonTimeout). The spawn context aborts it (proc.ReasonAbort).
	Deadline time.Time
	// Owner is the harness session the process runs for ("" = none): its spill files
	// go to that owner's directory of the Spool, and count as its own in the budget.
	Owner string
	// Start, when set, starts the leader in place of the Supervisor's own fork and
	// exec (see Starter); the Supervisor owns the tree all the same.
	Start proc.Starter
}

// Supervisor owns every process tree it spawns. It is the `subprocess` service value.
type Supervisor struct {
	opts Options
	log  *slog.Logger
	seq  atomic.Uint64

	life   sync.RWMutex // Spawn holds it shared; Close exclusively, to fence spawns
	closed bool

	mu         sync.Mutex
	cgRoot     *cgroupRoot // new trees' cgroups; nil in process-group mode
	cgHome     *cgroupRoot // the harness's cgroup directory, kept until Close
	cgFailures int         // consecutive spawns the cgroup refused (see cgroupFailed)
	isolation  string
	live       map[*Process]struct{}
	lingering  []lingerTree
	closing    bool        // Close started: no more sweeps are scheduled
	sweepTimer *time.Timer // the next sweep, if one is scheduled
	sweepAt    time.Time   // when it runs
	spool      *proc.Spool
	watchdog   *watchdogProc // nil if it could not start

	paths sync.Map // program name + PATH → absolute path (see lookPath)
	pipes pipePool // output pipes made ahead of need

	nullOnce sync.Once // devNull
	null     *os.File
	nullErr  error

	sweeping  sync.Mutex     // one sweep (or Close's teardown) at a time
	sweepers  sync.WaitGroup // scheduled sweep callbacks
	closeOnce sync.Once
	onClose   []func() // under mu; run at the end of Close
}

// lingerTree is a settled process whose tree may live on: its leader exited by itself
// while other members kept running (a `cmd &` left behind), or, in process-group mode,
// nobody has looked yet. Its leader stays an unreaped zombie, which keeps the group id
// from being reused, until a sweep finds the tree empty; what is left of it is ended
// when the Supervisor closes.
type lingerTree struct {
	p      *Process
	checks int // sweeps that found it still alive
}

// Sweep cadence: a new lingering tree is looked at after sweepMin (in process-group mode
// that is when the leader of an ordinary command is reaped); a tree found alive is looked
// at again after twice the previous delay, up to sweepMax.
const (
	sweepMin = 200 * time.Millisecond
	sweepMax = 5 * time.Second
)

// New returns a Supervisor. It sets up cgroup isolation when possible (Isolation says
// which mode is active and why), killing what dead harnesses left running in their
// cgroups, and starts the crash-cleanup watchdog.
func New(opts Options) *Supervisor {
	s := &Supervisor{opts: opts, log: opts.Logger, live: map[*Process]struct{}{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	closeInheritedFDs()
	s.spool = proc.NewSpool(proc.SpoolOptions{Root: opts.SpillRoot, BudgetBytes: opts.SpillBudgetBytes, Logger: s.log})
	if opts.DisableCgroups {
		s.isolation = "process group only (cgroups disabled by configuration)"
	} else if root, err := newCgroupRoot(s.log); err != nil {
		s.isolation = "process group only (" + err.Error() + ")"
	} else {
		s.cgRoot, s.cgHome = root, root
		s.isolation = "cgroup v2 at " + root.dir
	}
	// A harness that is the init of its pid namespace needs no watchdog: when it dies,
	// the kernel kills every process of the namespace.
	if os.Getpid() != 1 && !opts.NoCrashCleanup {
		dir := ""
		if s.cgHome != nil {
			dir = s.cgHome.dir
		}
		wd, err := startWatchdog(dir, s.log)
		if err != nil {
			s.log.Warn("subprocess: no crash-cleanup watchdog; if the harness is killed, its commands keep running", "err", err)
		}
		s.watchdog = wd
	}
	return s
}

// Isolation describes the active process-isolation mode: "cgroup v2 at <dir>" or
// "process group only (<reason>)".
func (s *Supervisor) Isolation() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.isolation
}

// SpillDir is the private spill directory ("" until the first spill).
func (s *Supervisor) SpillDir() string { return s.spool.Dir() }

// Spool is where the Supervisor's processes capture their output. Other executors may
// capture through it too (Spool.NewStream), sharing its directory and budget; it is
// closed with the Supervisor.
func (s *Supervisor) Spool() *proc.Spool { return s.spool }

// Spawn starts spec as a new process tree. Invalid input and an already-cancelled ctx
// fail before anything runs; an operating-system failure to start is a
// *proc.SpawnError.
// Cancelling ctx later kills the tree (Exit.Reason ReasonAbort); pass a context without
// cancellation to detach the process from the caller.
func (s *Supervisor) Spawn(ctx context.Context, spec Spec) (*Process, error) {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return nil, errors.New("invalid argv: expected a non-empty program name at argv[0]")
	}
	for _, a := range spec.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, errors.New("invalid argv: an argument contains a NUL byte")
		}
	}
	if err := proc.CheckLimits(spec.GraceMs, spec.Stdout, spec.Stderr); err != nil {
		return nil, err
	}
	if err := checkEnv(spec.Env, spec.DshEnv); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("aborted before spawn: %w", context.Cause(ctx))
	}

	s.life.RLock()
	defer s.life.RUnlock()
	if s.closed {
		return nil, ErrDisposed
	}

	prog := spec.Argv[0]
	if !strings.Contains(prog, "/") {
		lp, err := s.lookPath(prog)
		if err != nil {
			return nil, &proc.SpawnError{Op: "exec", Path: prog, Err: err}
		}
		prog = lp
	}

	p := &Process{
		sup:     s,
		id:      s.seq.Add(1),
		grace:   time.Duration(spec.GraceMs) * time.Millisecond,
		retired: make(chan struct{}),
	}
	p.tear.Init(p.grace, (*tree)(p))

	var closeAfterStart []*os.File
	cleanup := func() {
		for _, f := range closeAfterStart {
			f.Close()
		}
	}
	var childIn *os.File
	if spec.Stdin == nil {
		null, err := s.devNull()
		if err != nil {
			return nil, &proc.SpawnError{Op: "open", Path: os.DevNull, Err: err}
		}
		childIn = null // shared by every spawn; not closed here
	} else {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, &proc.SpawnError{Op: "pipe", Err: err}
		}
		childIn, p.wIn, p.stdin = r, w, spec.Stdin
		closeAfterStart = append(closeAfterStart, childIn)
	}
	rOut, wOut, err := s.pipes.take()
	if err != nil {
		cleanup()
		p.closeParentEnds()
		return nil, &proc.SpawnError{Op: "pipe", Err: err}
	}
	p.rOut = rOut
	closeAfterStart = append(closeAfterStart, wOut)
	rErr, wErr, err := s.pipes.take()
	if err != nil {
		cleanup()
		p.closeParentEnds()
		return nil, &proc.SpawnError{Op: "pipe", Err: err}
	}
	p.rErr = rErr
	closeAfterStart = append(closeAfterStart, wErr)

	sys := &syscall.SysProcAttr{Setsid: true}
	pidfd := -1
	if pidfdSupported() {
		sys.PidFD = &pidfd
	}
	attr := &syscall.ProcAttr{
		Dir:   spec.Dir,
		Env:   buildEnv(spec.Env, spec.DshEnv),
		Files: []uintptr{childIn.Fd(), wOut.Fd(), wErr.Fd()},
		Sys:   sys,
	}
	cg, cgRoot := s.newCgroup(p.id)
	if cg != nil {
		sys.UseCgroupFD, sys.CgroupFD = true, cg.fd
	}
	if err := ctx.Err(); err != nil {
		cleanup()
		p.closeParentEnds()
		if cg != nil {
			_ = cg.remove()
		}
		return nil, fmt.Errorf("aborted before spawn: %w", context.Cause(ctx))
	}
	start := func() (int, error) {
		if spec.Start == nil {
			return forkExec(prog, spec.Argv, attr)
		}
		cgfd := -1
		if sys.UseCgroupFD {
			cgfd = sys.CgroupFD
		}
		st, err := startWith(spec.Start, prog, spec.Argv, attr, [3]*os.File{childIn, wOut, wErr}, cgfd)
		if err != nil {
			return 0, err
		}
		p.started = st
		return st.Pid(), nil
	}
	pid, err := start()
	switch {
	case err != nil && cg != nil && cgroupFault(err):
		// Spawning into the cgroup may be what failed (no clone3, a restricted
		// hierarchy): retry once without it. If that works, the cgroup was the problem.
		_ = cg.remove()
		cg, cgRoot = nil, nil
		sys.UseCgroupFD, sys.CgroupFD = false, 0
		var retryErr error
		pid, retryErr = start()
		if retryErr == nil {
			s.cgroupFailed("spawning into a cgroup failed", err)
		}
		err = retryErr
	case err == nil && cg != nil:
		s.cgroupWorked()
	}
	cleanup() // the child's ends; ForkExec is done with their descriptors
	if err != nil {
		p.closeParentEnds()
		if cg != nil {
			_ = cg.remove()
		}
		var se *proc.SpawnError
		if errors.As(err, &se) {
			return nil, se
		}
		if errors.Is(err, syscall.ENOENT) && prog != spec.Argv[0] {
			s.forgetPath(spec.Argv[0]) // the program found earlier is gone
		}
		return nil, spawnError(err, spec.Dir, prog)
	}
	s.pipes.refill() // for the next command, while this one runs
	if p.started != nil {
		pidfd = -1 // the Starter reports the exit
	}
	p.pid, p.pidfd, p.cg, p.cgRoot = pid, pidfd, cg, cgRoot
	if cg == nil {
		// Without a cgroup, the group is what the watchdog can kill if the harness dies.
		p.watchdog = s.watchdog
		s.watchdog.track(pid)
	}
	id := strconv.FormatUint(p.id, 10)
	p.stdout = s.spool.NewNamedStream(spec.Owner, spec.Stdout, id+"-stdout.log")
	p.stderr = s.spool.NewNamedStream(spec.Owner, spec.Stderr, id+"-stderr.log")

	s.mu.Lock()
	s.live[p] = struct{}{}
	s.mu.Unlock()

	p.readers.Add(2)
	go p.readLoop(p.rOut, p.stdout)
	go p.readLoop(p.rErr, p.stderr)
	if p.wIn != nil {
		p.stdinDone = make(chan struct{})
		go p.writeStdin()
	}
	p.tear.Arm(ctx, spec.Deadline, ErrTimedOut)
	go p.wait()
	return p, nil
}

func (p *Process) closeParentEnds() {
	for _, f := range []*os.File{p.rOut, p.rErr, p.wIn} {
		if f != nil {
			f.Close()
		}
	}
}

// spawnError attributes a failed start to the working directory or the program.
func spawnError(err error, dir, prog string) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return &proc.SpawnError{Op: "exec", Path: prog, Err: err}
	}
	if dir != "" {
		if fi, serr := os.Stat(dir); serr != nil {
			var se syscall.Errno
			if errors.As(serr, &se) {
				return &proc.SpawnError{Op: "chdir", Path: dir, Err: se}
			}
			return &proc.SpawnError{Op: "chdir", Path: dir, Err: serr}
		} else if !fi.IsDir() {
			return &proc.SpawnError{Op: "chdir", Path: dir, Err: syscall.ENOTDIR}
		}
	}
	return &proc.SpawnError{Op: "exec", Path: prog, Err: errno}
}

// cgroupSpawnFault, when set (by tests), returns the error with which a spawn into a
// cgroup fails instead of starting the process.
var cgroupSpawnFault func() error

// forkExec starts a process. (It calls syscall.ForkExec directly, not through a function
// value, so that the attributes can stay on the caller's stack.)
func forkExec(prog string, argv []string, attr *syscall.ProcAttr) (int, error) {
	if attr.Sys.UseCgroupFD && cgroupSpawnFault != nil {
		if err := cgroupSpawnFault(); err != nil {
			return 0, err
		}
	}
	return syscall.ForkExec(prog, argv, attr)
}

// cgroupFault reports whether an error of a spawn into a cgroup, or of making the
// cgroup, may mean that the cgroup cannot be used at all (no clone3, a cgroup that
// refuses new members, no permission, a read-only or vanished hierarchy). A shortage
// (EAGAIN, ENOMEM, EMFILE…) is transient and says nothing about the cgroup; errors
// that can equally be the program's or the directory's (ENOENT, EACCES…) are told
// apart by a retry without the cgroup.
func cgroupFault(err error) bool {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	switch errno {
	case syscall.EACCES, syscall.EPERM, syscall.ENOENT, syscall.EROFS, syscall.EBADF, syscall.EINVAL,
		syscall.ENOSYS, syscall.EOPNOTSUPP, syscall.EBUSY, syscall.ENODEV:
		return true
	}
	return false
}

// maxCgroupFailures is how many spawns in a row the cgroup must fail, with a cgroup
// fault, before the Supervisor stops using cgroups: one failure may be a passing state
// of the hierarchy, and each failed command still runs (under its process group).
const maxCgroupFailures = 3

// cgroupFailed counts a spawn the cgroup failed with a cgroup fault; after
// maxCgroupFailures in a row the Supervisor falls back to process groups.
func (s *Supervisor) cgroupFailed(what string, err error) {
	s.mu.Lock()
	s.cgFailures++
	n := s.cgFailures
	s.mu.Unlock()
	reason := what + ": " + proc.ErrnoText(err)
	if n < maxCgroupFailures {
		s.log.Warn("subprocess: no cgroup for this command; it runs under its process group only", "err", reason)
		return
	}
	s.disableCgroups(reason)
}

// cgroupWorked ends a run of cgroup failures.
func (s *Supervisor) cgroupWorked() {
	s.mu.Lock()
	s.cgFailures = 0
	s.mu.Unlock()
}

func (s *Supervisor) newCgroup(id uint64) (*cgroup, *cgroupRoot) {
	s.mu.Lock()
	root := s.cgRoot
	s.mu.Unlock()
	if root == nil {
		return nil, nil
	}
	cg, err := root.get(id)
	if err != nil {
		if cgroupFault(err) {
			s.cgroupFailed("cannot make a cgroup", err)
		} else {
			s.log.Warn("subprocess: no cgroup for this command; it runs under its process group only", "err", err)
		}
		return nil, nil
	}
	return cg, root
}

func (s *Supervisor) disableCgroups(reason string) {
	s.mu.Lock()
	if s.cgRoot == nil {
		s.mu.Unlock()
		return
	}
	s.isolation = "process group only (" + reason + ")"
	iso := s.isolation
	// The root directory stays until Close: trees spawned before keep their cgroups.
	s.cgRoot = nil
	s.cgFailures = 0
	s.mu.Unlock()
	s.log.Warn("subprocess: falling back to process-group isolation", "reason", reason)
	if s.opts.OnIsolationChange != nil {
		s.opts.OnIsolationChange(iso)
	}
}

// forget drops a settled process; a tree that may live on is remembered (with its
// leader unreaped) until a sweep finds it empty, or Close ends it.
func (s *Supervisor) forget(p *Process, lingering bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, p)
	if lingering {
		s.lingering = append(s.lingering, lingerTree{p: p})
		s.scheduleSweepLocked(sweepMin)
	}
}

// scheduleSweepLocked makes sure a sweep runs within d.
func (s *Supervisor) scheduleSweepLocked(d time.Duration) {
	if s.closing {
		return
	}
	at := time.Now().Add(d)
	if s.sweepTimer != nil {
		if !at.Before(s.sweepAt) || !s.sweepTimer.Stop() {
			return // an earlier sweep is due (or running, and reschedules for what is left)
		}
		s.sweepers.Done()
	}
	s.sweepAt = at
	s.sweepers.Add(1)
	s.sweepTimer = time.AfterFunc(d, func() {
		defer s.sweepers.Done()
		s.mu.Lock()
		s.sweepTimer = nil
		s.mu.Unlock()
		s.sweep()
	})
}

// sweep releases the lingering trees that have ended (reaps their leaders, removes their
// cgroups) and schedules itself again while some are left. One scan of /proc serves every
// process-group tree.
func (s *Supervisor) sweep() {
	s.sweeping.Lock()
	defer s.sweeping.Unlock()
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	trees := s.lingering
	s.lingering = nil
	s.mu.Unlock()
	alive := treesAlive(trees)
	keep := make([]lingerTree, 0, len(trees))
	for i, t := range trees {
		if t.p.cg != nil && !alive[i] && t.p.cg.remove() != nil {
			alive[i] = true // not removable yet: look again later
		}
		if !alive[i] {
			t.p.release()
			continue
		}
		t.checks++
		keep = append(keep, t)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lingering = append(s.lingering, keep...)
	if len(s.lingering) == 0 {
		return
	}
	d := sweepMax
	for _, t := range s.lingering {
		d = min(d, sweepMin<<min(t.checks, 8))
	}
	s.scheduleSweepLocked(d)
}

// treesAlive reports, for each tree, whether any of its processes (other than zombies)
// is left: its cgroup is populated, or, without one, its process group has a live member.
func treesAlive(trees []lingerTree) []bool {
	alive := make([]bool, len(trees))
	var groups map[int]bool
	for i, t := range trees {
		if t.p.cg != nil {
			alive[i] = t.p.cg.populated()
			continue
		}
		if groups == nil {
			groups = liveGroups()
		}
		alive[i] = groups[t.p.pid]
	}
	return alive
}

// Close disposes the Supervisor: no new spawns; every live tree is killed (SIGTERM, then
// SIGKILL after its grace period) and waited for, and its process settles as killed;
// trees left behind by finished commands are ended too; then the cgroups and the spill
// directory are removed, and the watchdog is told to exit. Finished processes keep
// their results. Close is idempotent and returns when everything is done.
func (s *Supervisor) Close() {
	s.closeOnce.Do(func() {
		s.life.Lock()
		s.closed = true
		s.life.Unlock()

		s.mu.Lock()
		s.closing = true
		if s.sweepTimer != nil && s.sweepTimer.Stop() {
			s.sweepers.Done()
		}
		s.sweepTimer = nil
		live := make([]*Process, 0, len(s.live))
		for p := range s.live {
			live = append(live, p)
		}
		s.mu.Unlock()
		for _, p := range live {
			p.tear.Kill(proc.ReasonDispose, ErrDisposed, true)
		}
		for _, p := range live {
			<-p.retired
		}

		s.sweeping.Lock()
		s.mu.Lock()
		trees := s.lingering
		s.lingering = nil
		home := s.cgHome
		s.mu.Unlock()
		endTrees(trees)
		for _, t := range trees {
			t.p.release()
			if t.p.cg != nil {
				if err := t.p.cg.remove(); err != nil {
					s.log.Warn("subprocess: cannot remove a cgroup", "err", err)
				}
			}
		}
		s.sweeping.Unlock()
		s.sweepers.Wait()
		if home != nil {
			if err := home.close(); err != nil {
				s.log.Warn("subprocess: cannot remove the cgroup directory", "err", err)
			}
		}
		// Every process has settled: its files are retired, and now withdrawn.
		s.spool.Close()
		// Nothing is left for the watchdog to clean up: it exits.
		s.watchdog.stop()
		// No spawn can start any more (closed, under the life lock).
		s.pipes.close()
		s.nullOnce.Do(func() {})
		if s.null != nil {
			s.null.Close()
		}
		s.mu.Lock()
		hooks := s.onClose
		s.onClose = nil
		s.mu.Unlock()
		for _, fn := range hooks {
			fn()
		}
	})
}

// OnClose registers fn to run when Close has ended every process: for state another
// package keeps per Supervisor (a sandbox's sessions), which must not outlive it. After
// Close, fn runs at once.
func (s *Supervisor) OnClose(fn func()) {
	s.mu.Lock()
	if !s.closing {
		s.onClose = append(s.onClose, fn)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	fn()
}

// endTrees ends lingering trees: SIGTERM to each tree (its cgroup, or its group), then,
// once the longest grace period has passed, SIGKILL to whatever is left. A group is
// signalled only while its leader is unreaped (see Process.signal), so no group id can
// have been reused.
func endTrees(trees []lingerTree) {
	if len(trees) == 0 {
		return
	}
	alive := treesAlive(trees)
	var grace time.Duration
	for i, t := range trees {
		if !alive[i] {
			continue
		}
		grace = max(grace, t.p.grace)
		t.p.signal(syscall.SIGTERM)
	}
	waitUntil := func(d time.Duration) bool {
		deadline := time.Now().Add(d)
		for {
			if !slices.Contains(alive, true) {
				return true
			}
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(10 * time.Millisecond)
			alive = treesAlive(trees)
		}
	}
	if waitUntil(grace) {
		return
	}
	for i, t := range trees {
		if alive[i] {
			t.p.signal(syscall.SIGKILL)
		}
	}
	waitUntil(2 * time.Second)
}

// lookPath finds a program name in the harness's PATH. A found program is remembered
// for that PATH value — a search of PATH costs tens of microseconds, every command needs
// one, and the answer rarely changes — and forgotten when starting it fails with ENOENT.
func (s *Supervisor) lookPath(name string) (string, error) {
	key := name + "\x00" + os.Getenv("PATH")
	if v, ok := s.paths.Load(key); ok {
		return v.(string), nil
	}
	path, err := exec.LookPath(name)
	if err != nil {
		var ee *exec.Error
		if errors.As(err, &ee) {
			err = ee.Err
		}
		return "", err
	}
	s.paths.Store(key, path)
	return path, nil
}

// forgetPath drops a remembered program path that no longer starts.
func (s *Supervisor) forgetPath(name string) {
	s.paths.Delete(name + "\x00" + os.Getenv("PATH"))
}

// pipePool keeps a few output pipes made ahead of need, while earlier commands ran, so
// that making them (pipe2, fcntl, the poller's registration) is on no call's path.
// Each pipe is used by one command only: the pool hands out pipes it made, never
// pipes handed back.
type pipePool struct {
	mu      sync.Mutex
	ready   [][2]*os.File // read end, write end
	filling bool          // a fill goroutine runs
	closed  bool
	fillers sync.WaitGroup
}

// pipesAhead is how many pipes the pool keeps: one command's stdout and stderr.
const pipesAhead = 2

// take returns a ready pipe, or makes one.
func (pp *pipePool) take() (r, w *os.File, err error) {
	pp.mu.Lock()
	if n := len(pp.ready); n > 0 {
		p := pp.ready[n-1]
		pp.ready = pp.ready[:n-1]
		pp.mu.Unlock()
		return p[0], p[1], nil
	}
	pp.mu.Unlock()
	return outputPipe()
}

// refill starts making pipes in the background, unless the pool is full, closed, or
// being filled already.
func (pp *pipePool) refill() {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.filling || pp.closed || len(pp.ready) >= pipesAhead {
		return
	}
	pp.filling = true
	pp.fillers.Add(1)
	go pp.fill()
}

func (pp *pipePool) fill() {
	defer pp.fillers.Done()
	for {
		r, w, err := outputPipe()
		pp.mu.Lock()
		if err != nil || pp.closed {
			pp.filling = false
			pp.mu.Unlock()
			if err == nil {
				r.Close()
				w.Close()
			}
			return
		}
		pp.ready = append(pp.ready, [2]*os.File{r, w})
		full := len(pp.ready) >= pipesAhead
		pp.filling = !full
		pp.mu.Unlock()
		if full {
			return
		}
	}
}

// close closes the ready pipes; once it returns, no pipe is made any more.
func (pp *pipePool) close() {
	pp.mu.Lock()
	pp.closed = true
	ready := pp.ready
	pp.ready = nil
	pp.mu.Unlock()
	pp.fillers.Wait() // a fill under way closes what it made
	for _, p := range ready {
		p[0].Close()
		p[1].Close()
	}
}

// outputPipe returns a pipe for one output stream: the read end, the parent's,
// registered with the runtime's poller (reads park the goroutine, and the drain bound
// is a read deadline), and the write end, the child's, a plain descriptor the poller
// never sees — it only goes to the child and is closed once the child has it.
func outputPipe() (r, w *os.File, err error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, err
	}
	// The read end's flags are exactly O_RDONLY: one F_SETFL makes it non-blocking.
	if _, err := unix.FcntlInt(uintptr(fds[0]), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "|0"), os.NewFile(uintptr(fds[1]), "|1"), nil
}

// devNull is the stdin of every command that has none: /dev/null, opened once.
func (s *Supervisor) devNull() (*os.File, error) {
	s.nullOnce.Do(func() { s.null, s.nullErr = os.Open(os.DevNull) })
	return s.null, s.nullErr
}
