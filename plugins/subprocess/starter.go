package subprocess

import (
	"os"
	"syscall"
)

// Starter starts the leader of a process tree somewhere other than as the Supervisor's
// own child: for example inside a sandbox process that stays the leader's parent
// (bash-sandbox starts each confined command in its session's sandbox this way). Set it
// in Spec.Start.
//
// The Supervisor still owns the tree: it makes the pipes and the cgroup, captures the
// output, signals the tree (SIGTERM then SIGKILL to the process group by number, and
// to the cgroup), drains, settles, and sweeps what a finished leader left behind, all
// exactly as for a tree it forks itself. Only three things come from the Starter: the
// start, the leader's exit status, and the reaping of the leader. The Supervisor's
// invariant carries over: the leader stays an unreaped zombie until the Supervisor
// calls Release, so its pid — which is also the group id the Supervisor signals —
// cannot be reused while the group may still be signalled.
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
	// returns; the Supervisor closes them then (the Starter must not).
	Files [3]*os.File
	// CgroupFD is the tree's cgroup directory, or -1 when the tree has none. The
	// leader must start inside it (clone3 with CLONE_INTO_CGROUP), so that nothing it
	// forks escapes the cgroup before it is there. A Start that fails with EPERM,
	// EACCES, EBUSY… into a cgroup is retried once with -1, as the Supervisor's own
	// spawns are.
	CgroupFD int
}

// Started is a leader started by a Starter. Its methods may be called from any
// goroutine; the Supervisor calls each of Wait and Release once, Release only after
// Wait has returned.
type Started interface {
	// Pid is the leader's process id in the harness's PID namespace. The leader leads
	// a new session and process group, whose id is Pid.
	Pid() int
	// Wait blocks until the leader exits and returns how it ended, leaving it unreaped.
	// An error means the leader is lost (what started it is gone, and with it the
	// means to learn the exit or to reap): the Supervisor then settles the process as
	// killed by SIGKILL, with "[subprocess: <error>]" as the last line of its stderr,
	// kills what its cgroup still holds, and never again signals its group by number.
	Wait() (ExitStatus, error)
	// Release reaps the leader: from then on its pid may be reused.
	Release()
}

// ExitStatus is how a leader ended: Signal is the signal that ended it, or 0 when it
// exited with Code.
type ExitStatus struct {
	Code   int
	Signal syscall.Signal
}

// startWith starts the leader through st, in cgroup cgfd (-1 for none).
func startWith(st Starter, prog string, argv []string, attr *syscall.ProcAttr, files [3]*os.File, cgfd int) (Started, error) {
	return st.Start(StartRequest{
		Path:     prog,
		Argv:     argv,
		Dir:      attr.Dir,
		Env:      attr.Env,
		Files:    files,
		CgroupFD: cgfd,
	})
}
