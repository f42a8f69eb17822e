package subprocess

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dsh-dev/dsh/proc"
)

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
	// Terminal, when set, runs the leader under a pseudo-terminal of this size (see
	// terminal.go): Stdin must be nil, the output is Stdout, the input goes through
	// Process.WriteInput. With Start, the Starter allocates the terminal.
	Terminal *proc.Terminal
	// EndWithLeader kills what the tree still holds when its leader exits (see
	// owner.go): the process settles only once nothing of it is left.
	EndWithLeader bool
	// Hosts marks a tree that starts other trees as their Starter (a sandbox's box):
	// the end of its owner (EndOwner) does not kill it with the others — killed first,
	// it would orphan them where no cgroup holds them — but leaves it to the OnEndOwner
	// hooks, which run once the trees it started are gone.
	Hosts bool
	// Resources are the resource limits of the tree and of its owner's session (see
	// docs/limits.md): the tree gets cgroups of its own, below its session's, in each
	// hierarchy that enforces one, and its Exit a Budget. A limit the host cannot
	// enforce fails the spawn (CheckLimits tells it ahead).
	Resources proc.ResourceLimits
}

// Spawn starts spec as a new process tree. Invalid input and an already-cancelled ctx
// fail before anything runs; an operating-system failure to start is a
// *proc.SpawnError. Cancelling ctx later kills the tree (Exit.Reason
// proc.ReasonAbort); pass a context without cancellation to detach the process from
// the caller.
func (s *Supervisor) Spawn(ctx context.Context, spec Spec) (*Process, error) {
	if err := checkSpec(spec); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, abortedBeforeSpawn(ctx)
	}
	s.life.RLock()
	defer s.life.RUnlock()
	if s.closed {
		return nil, ErrDisposed
	}
	prog, err := s.program(spec.Argv[0])
	if err != nil {
		return nil, err
	}
	p := s.newProcess(spec)
	var l launch
	if err := s.plan(&l, p, spec, prog); err != nil {
		return nil, err
	}
	s.awaitWatchdogFor(l.cg != nil) // it covers every command from the first on
	l.deadline, l.abort = spec.Deadline, ctx.Done()
	if ctx.Err() != nil {
		l.discard(p)
		return nil, abortedBeforeSpawn(ctx)
	}
	if err := s.start(&l, p, spec); err != nil {
		return nil, err
	}
	s.begin(ctx, p, spec, &l)
	return p, nil
}

// checkSpec refuses what cannot run: no program, a NUL byte in an argument, limits out
// of range, an environment the kernel cannot carry.
func checkSpec(spec Spec) error {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return errors.New("invalid argv: expected a non-empty program name at argv[0]")
	}
	for _, a := range spec.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return errors.New("invalid argv: an argument contains a NUL byte")
		}
	}
	if err := proc.CheckLimits(spec.GraceMs, spec.Stdout, spec.Stderr); err != nil {
		return err
	}
	if t := spec.Terminal; t != nil {
		if spec.Stdin != nil {
			return errors.New("invalid spec: stdin cannot be given with a terminal")
		}
		if err := t.Check(); err != nil {
			return fmt.Errorf("invalid terminal: %w", err)
		}
	}
	return checkEnv(spec.Env, spec.DshEnv)
}

func abortedBeforeSpawn(ctx context.Context) error {
	return fmt.Errorf("aborted before spawn: %w", context.Cause(ctx))
}

// program is what to start for argv[0]: the name itself when it holds a slash, else
// its path in the harness's PATH.
func (s *Supervisor) program(name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path, err := s.lookPath(name)
	if err != nil {
		return "", &proc.SpawnError{Op: "exec", Path: name, Err: err}
	}
	return path, nil
}

func (s *Supervisor) newProcess(spec Spec) *Process {
	p := &Process{
		sup:           s,
		id:            s.seq.Add(1),
		owner:         spec.Owner,
		endWithLeader: spec.EndWithLeader,
		hosts:         spec.Hosts,
		grace:         time.Duration(spec.GraceMs) * time.Millisecond,
		retired:       make(chan struct{}),
	}
	p.tear.Init(p.grace, (*tree)(p))
	return p
}

// launch is the plan of one start: what the leader runs, the descriptors it gets, its
// attributes and its cgroup. It lives on Spawn's stack (it holds no pointer to
// itself), and ForkExec is called with its attributes directly.
type launch struct {
	prog    string
	argv    []string
	starter proc.Starter   // nil: the Supervisor forks and execs the leader itself
	term    *proc.Terminal // the leader runs under a terminal of this size
	// child holds the leader's stdin, stdout and stderr; ownStdin says whether its
	// stdin is a pipe of this spawn (else the shared /dev/null, never closed here).
	child    [3]*os.File
	ownStdin bool
	attr     syscall.ProcAttr
	sys      *syscall.SysProcAttr // attr.Sys
	pidfd    *int                 // set by ForkExec when the kernel has pidfds, else -1
	cg       *cgroup              // nil: the tree runs under its process group only
	cgRoot   *cgroupRoot          // where cg returns when the tree is gone
	bud      *budgetCgroups       // the cgroups of its resource limits; nil for none
	// deadline and abort bound a Starter's wait (proc.StartRequest).
	deadline time.Time
	abort    <-chan struct{}
}

// plan makes what the leader starts with: its stdio, its attributes (a new session,
// the managed environment, a pidfd where the kernel has them) and its cgroup.
func (s *Supervisor) plan(l *launch, p *Process, spec Spec, prog string) error {
	l.prog, l.argv, l.starter, l.term = prog, spec.Argv, spec.Start, spec.Terminal
	if spec.Terminal != nil {
		if err := s.terminalStdio(l, p, *spec.Terminal); err != nil {
			return err
		}
	} else if err := s.stdio(l, p, spec.Stdin); err != nil {
		return err
	}
	// The leader leads a new session; under a terminal, the terminal (its fd 0) is the
	// session's controlling terminal.
	l.sys = &syscall.SysProcAttr{Setsid: true, Setctty: spec.Terminal != nil}
	pidfd := -1
	if l.pidfd = &pidfd; pidfdSupported() {
		l.sys.PidFD = l.pidfd
	}
	l.attr = syscall.ProcAttr{
		Dir:   spec.Dir,
		Env:   buildEnv(spec.Env, spec.DshEnv),
		Files: []uintptr{l.child[0].Fd(), l.child[1].Fd(), l.child[2].Fd()},
		Sys:   l.sys,
	}
	if err := s.placeTree(l, p, spec); err != nil {
		l.closeChildEnds()
		p.closeParentEnds()
		return err
	}
	if l.cg != nil {
		l.sys.UseCgroupFD, l.sys.CgroupFD = true, l.cg.fd
	}
	return nil
}

// placeTree gives the tree its cgroups: those of its resource limits, and its cgroup
// v2 directory (the limits' own, or the Supervisor's).
func (s *Supervisor) placeTree(l *launch, p *Process, spec Spec) error {
	bc, err := s.budgets.place(spec.Owner, spec.Resources, s.usesCgroups())
	if err != nil {
		return &proc.SpawnError{Op: "cgroup", Err: err}
	}
	l.bud = bc
	if bc != nil && bc.v2 != nil {
		l.cg, l.cgRoot = bc.v2, bc.sess.v2root
		return nil
	}
	l.cg, l.cgRoot = s.newCgroup(p.id, bc != nil)
	if l.cg == nil {
		return nil
	}
	if bc != nil {
		// A reused directory: its CPU time so far is other commands'.
		bc.base.cpuMs = l.cg.usedMs
		if !l.cg.usedKnown {
			bc.base.cpuMs, _ = l.cg.cpuMs()
		}
	}
	l.cg.usedKnown = false // until a settle reads it with nothing left in it
	return nil
}

// stdio makes the leader's stdin — /dev/null, or a pipe the process writes Stdin
// into — and its output pipes (from the pool). On failure nothing is left open.
func (s *Supervisor) stdio(l *launch, p *Process, stdin []byte) error {
	if stdin == nil {
		null, err := s.devNull()
		if err != nil {
			return &proc.SpawnError{Op: "open", Path: os.DevNull, Err: err}
		}
		l.child[0] = null
	} else {
		r, w, err := os.Pipe()
		if err != nil {
			return &proc.SpawnError{Op: "pipe", Err: err}
		}
		l.child[0], l.ownStdin, p.wIn, p.stdin = r, true, w, stdin
	}
	var err error
	if p.rOut, l.child[1], err = s.pipes.take(); err == nil {
		p.rErr, l.child[2], err = s.pipes.take()
	}
	if err != nil {
		l.closeChildEnds()
		p.closeParentEnds()
		return &proc.SpawnError{Op: "pipe", Err: err}
	}
	return nil
}

// closeChildEnds closes the leader's ends of the pipes: once it started, it has them.
func (l *launch) closeChildEnds() {
	first := 1
	if l.ownStdin {
		first = 0
	}
	for _, f := range l.child[first:] {
		if f != nil {
			f.Close()
		}
	}
}

// discard undoes a plan that is not started.
func (l *launch) discard(p *Process) {
	l.closeChildEnds()
	p.closeParentEnds()
	if l.cg != nil {
		_ = l.cg.remove()
	}
	l.bud.discard()
}

// start starts the leader as l plans — into its cgroup, or, when that may be what
// fails, once more without it — and closes the child's ends of the pipes. A failure
// leaves nothing behind and is returned as a *proc.SpawnError.
func (s *Supervisor) start(l *launch, p *Process, spec Spec) error {
	pid, err := l.startOnce(p)
	limitsInV2 := l.bud != nil && l.bud.v2 != nil
	switch {
	case err != nil && l.cg != nil && !limitsInV2 && cgroupFault(err):
		// Spawning into the cgroup may be what failed (no clone3, a restricted
		// hierarchy): retry once without it. If that works, the cgroup was the problem.
		_ = l.cg.remove()
		l.cg, l.cgRoot = nil, nil
		l.sys.UseCgroupFD, l.sys.CgroupFD = false, 0
		var retryErr error
		pid, retryErr = l.startOnce(p)
		if retryErr == nil {
			s.cgroupFailed("spawning into a cgroup failed", err)
		}
		err = retryErr
	case err == nil && l.cg != nil:
		s.cgroupWorked()
	}
	l.closeChildEnds() // ForkExec is done with their descriptors
	if err != nil {
		p.closeParentEnds()
		if l.cg != nil {
			_ = l.cg.remove()
		}
		l.bud.discard()
		return s.startFailure(err, spec, l.prog)
	}
	oomFirst(pid)
	p.pid = pid
	return nil
}

// startOnce starts the leader: the Supervisor's own fork and exec, or the Starter's.
func (l *launch) startOnce(p *Process) (int, error) {
	if l.starter == nil {
		return forkExecIn(l.bud, l.prog, l.argv, &l.attr)
	}
	cgfd := -1
	if l.sys.UseCgroupFD {
		cgfd = l.sys.CgroupFD
	}
	st, err := startWith(l, cgfd, p.grace)
	if err != nil {
		return 0, err
	}
	if l.term != nil {
		if err := p.takeMaster(st); err != nil {
			abandonStarted(st)
			return 0, &proc.SpawnError{Op: "terminal", Err: err}
		}
	}
	p.started = st
	return st.Pid(), nil
}

// startFailure is the *proc.SpawnError of a start that failed. A program found in
// PATH earlier that is gone now is looked up afresh next time.
func (s *Supervisor) startFailure(err error, spec Spec, prog string) error {
	var se *proc.SpawnError
	if errors.As(err, &se) {
		return se
	}
	if errors.Is(err, syscall.ENOENT) && prog != spec.Argv[0] {
		s.forgetPath(spec.Argv[0])
	}
	return spawnError(err, spec.Dir, prog)
}

// begin takes the started tree into the Supervisor's care: the process holds its pidfd
// and cgroup (or the watchdog knows its group), its streams are open, the Supervisor
// lists it, its output is read and its stdin written, its deadline and context are
// armed, and its leader is awaited.
func (s *Supervisor) begin(ctx context.Context, p *Process, spec Spec, l *launch) {
	s.pipes.refill() // for the next command, while this one runs
	p.pidfd, p.cg, p.cgRoot, p.bud = *l.pidfd, l.cg, l.cgRoot, l.bud
	if p.started != nil {
		p.pidfd = -1 // the Starter reports the exit
	}
	if p.cg == nil {
		// Without a cgroup, the group is what the watchdog can kill if the harness dies
		// (a start planned in a cgroup may have fallen back to none: the watchdog's
		// start may still be under way).
		s.awaitWatchdog()
		p.watchdog = s.watchdog
		s.watchdog.track(p.pid)
	}
	id := strconv.FormatUint(p.id, 10)
	p.stdout = s.spool.NewNamedStream(spec.Owner, spec.Stdout, id+"-stdout.log")
	p.stderr = s.spool.NewNamedStream(spec.Owner, spec.Stderr, id+"-stderr.log")

	s.mu.Lock()
	s.live[p] = struct{}{}
	s.mu.Unlock()

	if p.tty != nil {
		// One stream: the terminal's. Stderr never gets a byte, and ends now.
		p.stderr.Close()
		p.readers.Add(1)
		go p.readLoop(p.rOut, p.stdout)
	} else {
		p.readers.Add(2)
		go p.readLoop(p.rOut, p.stdout)
		go p.readLoop(p.rErr, p.stderr)
	}
	if p.wIn != nil {
		p.stdinDone = make(chan struct{})
		go p.writeStdin()
	}
	p.tear.Arm(ctx, spec.Deadline, ErrTimedOut)
	go p.wait()
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
