package proc

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// SpawnError is an operating-system failure to start a process (missing working
// directory, program not found, no connection to the host…). Its message reads
// "spawn failed: …" and names the errno, e.g.
// "spawn failed: chdir /nope: ENOENT (no such file or directory)".
type SpawnError struct {
	// Op is the step that failed: "chdir", "exec", "pipe", "connect"…
	Op string
	// Path is the file or directory involved ("" when none).
	Path string
	// Err is the underlying error, usually a syscall.Errno.
	Err error
}

// Error is "spawn failed: <op> <path>: <cause>"; a cause with an errno names it, as in
// "ENOENT (no such file or directory)".
func (e *SpawnError) Error() string {
	if e.Path == "" {
		return "spawn failed: " + e.Op + ": " + ErrnoText(e.Err)
	}
	return "spawn failed: " + e.Op + " " + e.Path + ": " + ErrnoText(e.Err)
}

// Unwrap returns Err, for errors.Is and errors.As.
func (e *SpawnError) Unwrap() error { return e.Err }

// ErrnoText renders an error with an errno as "ENOENT (no such file or directory)", so
// that users and tests can match the symbolic name; other errors render as themselves.
func ErrnoText(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name + " (" + errno.Error() + ")"
		}
	}
	return err.Error()
}

// MaxGraceMs is the largest grace period a spawn accepts.
const MaxGraceMs = 2147483647

// CheckLimits checks the bounds of a spawn — graceMs in (0, MaxGraceMs], each stream's
// capture with a positive MaxBytes and a non-negative SpillMaxBytes — with the messages
// every spawner gives (the Supervisor's, the ssh Host's).
func CheckLimits(graceMs int64, stdout, stderr Capture) error {
	if graceMs <= 0 || graceMs > MaxGraceMs {
		return fmt.Errorf("invalid graceMs: expected 0 < graceMs <= %d, got %d", MaxGraceMs, graceMs)
	}
	for _, c := range [...]struct {
		name string
		c    Capture
	}{{"stdout", stdout}, {"stderr", stderr}} {
		if c.c.MaxBytes <= 0 {
			return fmt.Errorf("invalid %s capture: maxBytes must be positive, got %d", c.name, c.c.MaxBytes)
		}
		if c.c.SpillMaxBytes < 0 {
			return fmt.Errorf("invalid %s capture: spillMaxBytes must not be negative, got %d", c.name, c.c.SpillMaxBytes)
		}
	}
	return nil
}

// Starter starts the leader of a process tree somewhere other than as the
// Supervisor's own child: for example inside a box (the per-session sandbox process)
// that stays the leader's parent, as bash-sandbox starts each confined command. The
// subprocess service's Spec.Start takes one.
//
// The Supervisor still owns the tree: it makes the pipes and the cgroup, captures the
// output, signals the tree (SIGTERM then SIGKILL to the process group by number, and
// to the cgroup), drains, settles, and sweeps what a finished leader left behind, all
// exactly as for a tree it forks itself. Only three things come from the Starter: the
// start, the leader's exit, and the reaping of the leader. The Supervisor's invariant
// carries over: the leader stays an unreaped zombie until the Supervisor calls
// Release, so its pid — which is also the group id the Supervisor signals — cannot be
// reused while the group may still be signalled.
type Starter interface {
	// Start starts the leader as req describes, or fails without leaving anything
	// running. A failure to start the program or to enter the directory should be a
	// *SpawnError (Spawn returns it as is); any other error is wrapped in one.
	Start(req StartRequest) (Started, error)
}

// StartRequest is what a Starter starts: the same program, environment and descriptors
// the Supervisor would have given its own child.
type StartRequest struct {
	// Path is the program: Argv[0] as given when it contains a slash, else its path in
	// the harness's PATH.
	Path string
	// Argv is the program's argv.
	Argv []string
	// Dir is the working directory ("" = the starter's).
	Dir string
	// Env is the complete environment: the scrubbed harness environment, the fixed
	// overrides, the caller's variables, then the DSH_* snapshot.
	Env []string
	// Files are the leader's stdin, stdout and stderr. They stay open until Start
	// returns; the Supervisor closes them then (the Starter must not). They are nil
	// when Terminal is set.
	Files [3]*os.File
	// Terminal, when set, asks for the leader to run under a new terminal of this
	// size, which the Starter allocates: its slave side is the leader's stdin, stdout,
	// stderr and controlling terminal, and its Started must be a TerminalStarted that
	// hands over the master side. A Starter that cannot must fail the start.
	Terminal *Terminal
	// CgroupFD is the tree's cgroup directory, or -1 when the tree has none. The
	// leader must start inside it (clone3 with CLONE_INTO_CGROUP), so that nothing it
	// forks escapes the cgroup before it is there. A Start that fails with EPERM,
	// EACCES, EBUSY… into a cgroup is retried once with -1, as the Supervisor's own
	// spawns are (not when the cgroup holds the tree's resource limits).
	CgroupFD int
	// Deadline is the tree's deadline (zero for none) and Abort is closed when the
	// spawn's context is cancelled (nil for never): a Starter that waits on something
	// else to start the leader (a box) bounds that wait by them, plus Grace.
	Deadline time.Time
	Abort    <-chan struct{}
	// Grace is the tree's grace period: between SIGTERM and SIGKILL, and the longest a
	// Starter waits for what starts the leader to report an exit it has seen happen.
	Grace time.Duration
	// CgroupV1 are the tree's cgroups in the cgroup v1 hierarchies of its resource
	// limits (memory, pids, cpu), as their tasks files, open for writing; empty when it
	// has none. The leader must start inside them too: a thread joins one by writing
	// "0" to its tasks file, and what the thread then forks starts there. A Starter
	// that forks the leader on the calling thread calls JoinCgroupV1 around its fork;
	// one that forks it elsewhere (a box) has the thread that forks it write them.
	CgroupV1 []*os.File
	// JoinCgroupV1 moves the calling thread into CgroupV1 and returns the function
	// that moves it back; nil when CgroupV1 is empty.
	JoinCgroupV1 func() (leave func(), err error)
}

// Started is a leader started by a Starter. Its methods may be called from any
// goroutine; the Supervisor calls each of Wait and Release once, Release only after
// Wait has returned.
type Started interface {
	// Pid is the leader's process id in the harness's PID namespace. The leader leads
	// a new session and process group, whose id is Pid.
	Pid() int
	// Wait blocks until the leader exits and returns how it ended (its Code or Signal:
	// see WaitExit; the Supervisor adds the rest), leaving it unreaped. An error means
	// the leader is lost (what started it is gone, and with it the means to learn the
	// exit or to reap): the Supervisor then settles the process as killed by SIGKILL,
	// with "[subprocess: <error>]" as the last line of its stderr, kills what its
	// cgroup still holds, and never again signals its group by number.
	Wait() (Exit, error)
	// Release reaps the leader: from then on its pid may be reused.
	Release()
}
