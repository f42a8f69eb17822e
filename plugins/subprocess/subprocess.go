package subprocess

import (
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-dev/dsh/proc"
)

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
	// CgroupRoot, when set, is where the probe of resource limits looks for the cgroup
	// hierarchies instead of this process's own cgroups: <root>/unified standing for
	// its cgroup v2 one and <root>/<controller> for its cgroup v1 ones (for tests of a
	// host without a controller; commands cannot start in a tree that is not cgroupfs).
	CgroupRoot string
	// NoCrashCleanup starts no watchdog (see the package documentation): for a
	// short-lived Supervisor whose processes die with their own parent anyway, which
	// saves the watchdog's start (a few milliseconds).
	NoCrashCleanup bool
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
	watchdog   *watchdogProc // nil if it could not start; set before watchdogUp closes
	watchdogUp chan struct{} // closed once the watchdog's start is over (nil: none)
	// watchdogIn is closed once the watchdog's first stage runs, holding the read end
	// of its pipe (or its start is over): from then on a crash of the harness ends the
	// trees in its cgroup, whatever the start's later steps.
	watchdogIn chan struct{}
	// watchdogTodo holds the directories to tell the watchdog about (removeDir) that
	// came before its start was over; nil once it is.
	watchdogMu   sync.Mutex
	watchdogTodo *[]string
	budgets      *budgets // the cgroups of resource limits

	paths sync.Map // program name + PATH → absolute path (see lookPath)
	pipes pipePool // output pipes made ahead of need

	nullOnce sync.Once // devNull
	null     *os.File
	nullErr  error

	sweeping  sync.Mutex     // one sweep (or Close's teardown) at a time
	sweepers  sync.WaitGroup // scheduled sweep callbacks
	preparing sync.WaitGroup // PrepareLimits's makes
	closeOnce sync.Once
	onClose   []func()             // under mu; run at the end of Close
	ownerEnds []func(owner string) // under mu; run by EndOwner (owner.go)
}

// New returns a Supervisor. It sets up cgroup isolation when possible (Isolation says
// which mode is active and why), killing what dead harnesses left running in their
// cgroups, and starts the crash-cleanup watchdog — or takes over the one the binary's
// main started early (package early) — in the background (it re-executes the binary
// twice, a few milliseconds the harness need not wait for before its first answer),
// and the first spawn waits until it covers the new tree (awaitWatchdogFor).
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
		s.watchdogUp, s.watchdogIn = make(chan struct{}), make(chan struct{})
		s.watchdogTodo = new([]string)
		var in sync.Once
		holding := func() { in.Do(func() { close(s.watchdogIn) }) }
		go func() {
			defer close(s.watchdogUp)
			defer holding()
			wd, err := startWatchdog(dir, s.log, holding)
			if err != nil {
				s.log.Warn("subprocess: no crash-cleanup watchdog; if the harness is killed, its commands keep running", "err", err)
			}
			s.watchdogMu.Lock()
			defer s.watchdogMu.Unlock()
			s.watchdog = wd
			for _, d := range *s.watchdogTodo {
				wd.removeDir(d)
			}
			s.watchdogTodo = nil
		}()
	}
	s.budgets = s.newBudgets()
	return s
}

// awaitWatchdog returns once the watchdog's start is over (it runs, or could not
// start): before the first fork of a tree without a cgroup (the watchdog must know its
// group), and before anything uses s.watchdog.
func (s *Supervisor) awaitWatchdog() {
	if s.watchdogUp != nil {
		<-s.watchdogUp
	}
}

// awaitWatchdogFor returns once the watchdog covers a tree that has a cgroup (inCgroup)
// or not: a cgroup's trees are covered as soon as the first stage holds the pipe (see
// watchdogIn), a few milliseconds before the start is over.
func (s *Supervisor) awaitWatchdogFor(inCgroup bool) {
	if !inCgroup || s.watchdogIn == nil {
		s.awaitWatchdog()
		return
	}
	<-s.watchdogIn
}

// newBudgets probes where resource limits can be enforced, first ending what dead
// harnesses left in the cgroup v1 hierarchies.
func (s *Supervisor) newBudgets() *budgets {
	mounts, fake := hostMounts(), false
	if s.opts.CgroupRoot != "" {
		mounts, fake = fakeCgroupMounts(s.opts.CgroupRoot), true
	}
	swept := map[string]bool{}
	for _, own := range mounts.v1 {
		if !swept[own] {
			swept[own] = true
			killDeadV1Instances(own, s.log)
		}
	}
	v2 := ""
	if s.cgHome != nil {
		v2 = s.cgHome.dir
	}
	// The watchdog starts in the background: a directory made before it runs is told
	// to it once it does (no apply waits for it), and leaving the harness's own cgroup
	// (its pid must be known) waits for its start.
	notify := func(dir string) {
		s.watchdogMu.Lock()
		defer s.watchdogMu.Unlock()
		if s.watchdogTodo != nil {
			*s.watchdogTodo = append(*s.watchdogTodo, dir)
			return
		}
		s.watchdog.removeDir(dir)
	}
	movable := func() []int {
		s.awaitWatchdog()
		if s.watchdog == nil {
			return nil
		}
		return []int{s.watchdog.currentPid()} // the one in charge: a dead one is replaced
	}
	return newBudgets(s.log, mounts, fake, v2, notify, movable)
}

// CheckLimits reports whether this host enforces every limit r sets: nil, or a
// *LimitError naming the first it cannot ("limits.memory cannot be enforced on this
// host: no memory controller: …"). It readies the hierarchies the limits need.
func (s *Supervisor) CheckLimits(r proc.ResourceLimits) error { return s.budgets.check(r) }

// LimitsMechanism names what enforces the limits r sets, e.g. "cgroup v1 (memory,
// pids, cpu)"; "" for none.
func (s *Supervisor) LimitsMechanism(r proc.ResourceLimits) string { return s.budgets.mechanism(r) }

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

// Close disposes the Supervisor: no new spawns; every live tree is killed (SIGTERM, then
// SIGKILL after its grace period) and waited for, and its process settles as killed;
// trees left behind by finished commands are ended too; then the cgroups and the spill
// directory are removed, and the watchdog is told to exit. Finished processes keep
// their results. Close is idempotent and returns when everything is done.
func (s *Supervisor) Close() {
	s.closeOnce.Do(func() {
		s.life.Lock()
		s.closed = true // no spawn starts from now on
		s.life.Unlock()
		s.killLive()
		s.endLingering()
		s.releaseResources()
		s.mu.Lock()
		hooks := s.onClose
		s.onClose = nil
		s.mu.Unlock()
		for _, fn := range hooks {
			fn()
		}
	})
}

// killLive stops the sweeps, kills every live tree and waits until each has settled
// and retired.
func (s *Supervisor) killLive() {
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
}

// endLingering ends what finished commands left running (endTrees), reaps their
// leaders and removes their cgroups.
func (s *Supervisor) endLingering() {
	s.sweeping.Lock()
	defer s.sweeping.Unlock()
	s.mu.Lock()
	trees := s.lingering
	s.lingering = nil
	s.mu.Unlock()
	s.endReleased(trees, maxGrace)
}

// endReleased ends trees (endTrees, the SIGKILL at most limit after the SIGTERM),
// reaps their leaders and removes their cgroups; they are no longer lingering.
func (s *Supervisor) endReleased(trees []lingerTree, limit time.Duration) {
	endTrees(trees, limit)
	for _, t := range trees {
		t.p.release()
		if t.p.cg != nil {
			if err := t.p.cg.remove(); err != nil {
				s.log.Warn("subprocess: cannot remove a cgroup", "err", err)
			}
		}
		t.p.bud.remove()
	}
}

// releaseResources removes the harness's cgroup directory and the spill directory,
// tells the watchdog to exit, and closes the pipe pool and /dev/null: every process
// has settled, and no spawn can start any more.
func (s *Supervisor) releaseResources() {
	s.sweepers.Wait()
	s.preparing.Wait()
	s.mu.Lock()
	home := s.cgHome
	s.mu.Unlock()
	s.budgets.close()
	if home != nil {
		if err := home.close(); err != nil {
			s.log.Warn("subprocess: cannot remove the cgroup directory", "err", err)
		}
	}
	// Every process has settled: its files are retired, and now withdrawn.
	s.spool.Close()
	// Nothing is left for the watchdog to clean up: it exits.
	s.awaitWatchdog()
	s.watchdog.stop()
	s.pipes.close()
	s.nullOnce.Do(func() {})
	if s.null != nil {
		s.null.Close()
	}
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
