package proc

import (
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Exit is how a process ended: the one exit type of every layer, from a Starter's
// leader up to the seam's Execution.
type Exit struct {
	// Code is the leader's exit code; nil when a signal ended it, or when its fate is
	// unknown (Err, or a process that never ran).
	Code *int
	// Signal is the signal that ended the leader ("SIGTERM"…), or "".
	Signal string
	// Reason is why the service that runs the process (the subprocess Supervisor, the
	// ssh Host) started killing the tree before the leader exited (the first cause
	// wins), or ReasonNone.
	Reason Reason
	// Cause is the error behind Reason, when the service has one: the context's cause
	// for ReasonAbort, the service's sentinel otherwise (subprocess.ErrTimedOut…).
	Cause error
	// Err, when not nil, is an infrastructure failure that ended the supervision of the
	// process (a lost connection to a remote host): its real outcome is unknown.
	Err error
	// Budget is what the tree used of its resources and which limits it reached, when
	// the service that ran it accounted them (the Supervisor, for a tree it ran under
	// resource limits); nil otherwise.
	Budget *Budget
}

// Exited is the Exit of a leader that exited with code.
func Exited(code int) Exit { return Exit{Code: &code} }

// Signaled is the Exit of a leader that sig ended.
func Signaled(sig syscall.Signal) Exit { return Exit{Signal: SignalName(sig)} }

// WaitExit is the Exit of a wait status: Signaled(sig) when sig is not 0, else
// Exited(code).
func WaitExit(code int, sig syscall.Signal) Exit {
	if sig != 0 {
		return Signaled(sig)
	}
	return Exited(code)
}

// SignalName is the name of sig as exits report it: "SIGTERM", or "SIG<n>" for a
// signal without a name.
func SignalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return "SIG" + strconv.Itoa(int(sig))
}

// State is Killed when a signal ended the leader, its service killed it, or its
// supervision failed (Err); Completed otherwise.
func (e Exit) State() State {
	if e.Signal != "" || e.Reason != ReasonNone || e.Err != nil {
		return Killed
	}
	return Completed
}

// Reason says why the service that runs a process ended it.
type Reason int

const (
	// ReasonNone: the process ended by itself.
	ReasonNone Reason = iota
	// ReasonTimeout: the process's deadline passed.
	ReasonTimeout
	// ReasonAbort: the context the process was started with was cancelled.
	ReasonAbort
	// ReasonKill: the process's Kill was called.
	ReasonKill
	// ReasonDispose: the service that runs the process (the Supervisor, the ssh Host)
	// was closed.
	ReasonDispose
)

// String is the reason's name: "none", "timeout", "abort", "kill" or "dispose".
func (r Reason) String() string {
	switch r {
	case ReasonTimeout:
		return "timeout"
	case ReasonAbort:
		return "abort"
	case ReasonKill:
		return "kill"
	case ReasonDispose:
		return "dispose"
	}
	return "none"
}

// State is a process's lifecycle state as its users see it.
type State int

const (
	// Running: the process has not settled yet (its output may still be draining).
	Running State = iota
	// Completed: the leader exited by itself.
	Completed
	// Killed: a signal ended the leader, its service killed the tree, or its
	// supervision failed.
	Killed
)

// String is the state's name: "running", "completed" or "killed".
func (s State) String() string {
	switch s {
	case Completed:
		return "completed"
	case Killed:
		return "killed"
	}
	return "running"
}
