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
}

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
