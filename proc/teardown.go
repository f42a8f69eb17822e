package proc

import (
	"context"
	"sync"
	"time"
)

// Tree is what a Teardown ends: one process tree as the service that runs it reaches
// it (by signals on this host, by orders over a connection to another). The Teardown calls each method outside
// its lock, from the caller of Kill, a timer or the settling goroutine.
type Tree interface {
	// Terminate sends SIGTERM to every process of the tree. Kill calls it once per
	// teardown.
	Terminate()
	// Escalate sends SIGKILL to whatever is left of the tree, the grace period after
	// Terminate, unless the tree was found gone first. A tree whose Terminate escalates
	// by itself (a remote kill order) does nothing here.
	Escalate()
	// AwaitGone waits until nothing of the tree is left and reports true; it gives up,
	// reporting false, at escalateAt or once escalated is closed (nil: never).
	AwaitGone(escalateAt time.Time, escalated <-chan struct{}) bool
	// Cut stops reading the output: the leader exited the grace period ago and the
	// output has not reached EOF (something the leader left behind holds it open).
	Cut()
}

// Teardown is the end of one process, written once for every kind of tree:
//
//   - kill: Kill sends SIGTERM to the tree (Tree.Terminate), once per teardown;
//   - escalate: the grace period later, SIGKILL to whatever is left (Tree.Escalate),
//     even when the leader already exited;
//   - drain: once the leader exited (Exited), its output gets at most the grace period
//     to reach EOF, then the reading stops (Tree.Cut);
//   - settle: once the output is complete (Settling) and the kill, if one started, is
//     over (AwaitKill), the outcome is fixed (Settle) and Done closes. The first cause
//     of a kill is the one the exit reports.
//
// A deadline and a context (Arm) start the kill too, while the leader runs.
//
// The service that runs the process (the subprocess Supervisor, the ssh Host) drives
// it: Init, then Arm; Kill from anywhere at any time; and, from the one goroutine that
// settles the process, Exited, Settling, AwaitKill and Settle, in that order. Its
// phase only moves forward, each transition made by one method:
//
//	PhaseRunning  --Kill-->            PhaseKilling
//	PhaseRunning  --Exited-->          PhaseExited
//	PhaseKilling  --Exited-->          PhaseExitedKilling
//	PhaseExited   --Kill (explicit)--> PhaseExitedKilling
//	any of these  --Settling-->        PhaseSettling
//	PhaseSettling --Settle-->          PhaseSettled
//	PhaseRunning  --Abandon-->         PhaseSettled (a process that never ran)
//
// A Teardown must not be copied after Init. Its methods are safe for concurrent use.
type Teardown struct {
	tree  Tree
	grace time.Duration
	done  chan struct{}
	// timers counts the armed callbacks (deadline, context, escalation, drain bound):
	// none runs any more once AwaitKill has returned.
	timers sync.WaitGroup

	mu         sync.Mutex
	phase      Phase
	from       Phase // the phase Settling left
	exit       Exit
	cut        bool // the drain bound passed: Tree.Cut ran
	deadline   *time.Timer
	stopCtx    func() bool
	drain      *time.Timer
	escalation *time.Timer
	escalateAt time.Time     // when escalation fires
	terminated chan struct{} // closed once Tree.Terminate returned (made by Kill)
	escalated  chan struct{} // closed once Tree.Escalate returned (made by Kill)
	disarmed   bool          // Disarm ran: the deadline and the context kill nothing
}

// Phase is where a process is in its teardown (see Teardown for the transitions).
type Phase int

const (
	// PhaseRunning: the leader runs, and nothing is ending it.
	PhaseRunning Phase = iota
	// PhaseKilling: the leader runs; the tree got SIGTERM and SIGKILL is armed.
	PhaseKilling
	// PhaseExited: the leader exited by itself; the output drains.
	PhaseExited
	// PhaseExitedKilling: the leader exited and what is left of its tree is being
	// killed; the output drains.
	PhaseExitedKilling
	// PhaseSettling: the output is complete; no kill is accepted; a kill under way
	// finishes.
	PhaseSettling
	// PhaseSettled: the outcome is fixed and Done is closed.
	PhaseSettled
)

// Exited reports whether the leader's exit was recorded in this phase.
func (p Phase) Exited() bool { return p == PhaseExited || p == PhaseExitedKilling }

// Killing reports whether a kill is under way in this phase.
func (p Phase) Killing() bool { return p == PhaseKilling || p == PhaseExitedKilling }

// String is the phase's name: "running", "killing", "exited", "exited-killing",
// "settling" or "settled".
func (p Phase) String() string {
	switch p {
	case PhaseKilling:
		return "killing"
	case PhaseExited:
		return "exited"
	case PhaseExitedKilling:
		return "exited-killing"
	case PhaseSettling:
		return "settling"
	case PhaseSettled:
		return "settled"
	}
	return "running"
}

// Init readies t to end tree, with grace as the time between SIGTERM and SIGKILL and
// the bound on the drain.
func (t *Teardown) Init(grace time.Duration, tree Tree) {
	t.tree, t.grace, t.done = tree, grace, make(chan struct{})
}

// Done is closed when the process has settled.
func (t *Teardown) Done() <-chan struct{} { return t.done }

// Exit returns how the process ended, and false (with a zero Exit) until it settled.
func (t *Teardown) Exit() (Exit, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.phase != PhaseSettled {
		return Exit{}, false
	}
	return t.exit, true
}

// State is Running until the process has settled, then its exit's State.
func (t *Teardown) State() State {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.phase != PhaseSettled {
		return Running
	}
	return t.exit.State()
}

// LeaderRuns reports whether the leader may still run: its exit was not recorded and
// the process has not settled.
func (t *Teardown) LeaderRuns() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch t.phase {
	case PhaseRunning, PhaseKilling:
		return true
	case PhaseSettling:
		return !t.from.Exited()
	}
	return false
}

// Arm kills the tree when deadline passes (ReasonTimeout, with timeoutCause) or ctx is
// cancelled (ReasonAbort, with the context's cause), while the leader runs. A zero
// deadline and a context without cancellation arm nothing; once the leader exited
// nothing is armed.
func (t *Teardown) Arm(ctx context.Context, deadline time.Time, timeoutCause error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.phase != PhaseRunning && t.phase != PhaseKilling || t.disarmed {
		return
	}
	if !deadline.IsZero() {
		t.timers.Add(1)
		t.deadline = time.AfterFunc(time.Until(deadline), func() {
			defer t.timers.Done()
			t.Kill(ReasonTimeout, timeoutCause, false)
		})
	}
	if ctx.Done() != nil {
		t.timers.Add(1)
		t.stopCtx = context.AfterFunc(ctx, func() {
			defer t.timers.Done()
			t.Kill(ReasonAbort, context.Cause(ctx), false)
		})
	}
}

// Kill starts the kill sequence: SIGTERM now (Tree.Terminate), SIGKILL to what is left
// after the grace period (Tree.Escalate). The exit reports reason and cause unless the
// leader exited first. A kill that is not explicit (a deadline's, a context's) applies
// only while the leader runs; an explicit one (a Kill call, the service's Close) also
// ends what is left of the tree after the leader exited. Kill reports false once the
// process is settling; a second kill changes nothing and reports true.
func (t *Teardown) Kill(reason Reason, cause error, explicit bool) bool {
	t.mu.Lock()
	switch {
	case t.phase >= PhaseSettling, t.phase.Exited() && !explicit, t.disarmed && !explicit:
		t.mu.Unlock()
		return false
	case t.phase.Killing():
		t.mu.Unlock()
		return true
	case t.phase == PhaseRunning:
		t.phase = PhaseKilling
		t.exit.Reason, t.exit.Cause = reason, cause
	default:
		t.phase = PhaseExitedKilling
	}
	t.terminated, t.escalated = make(chan struct{}), make(chan struct{})
	terminated := t.terminated
	t.timers.Add(1)
	t.escalateAt = time.Now().Add(t.grace)
	t.escalation = time.AfterFunc(t.grace, t.escalate)
	t.mu.Unlock()
	t.tree.Terminate()
	close(terminated)
	return true
}

// Disarm takes back what Arm armed: from now on neither the deadline nor the context
// kills the tree, only Kill does (a caller hands the process over to outlive its own
// call). It reports false when that is too late — a kill started, the leader exited,
// the process settled — and true otherwise. A deadline or context that fired at the
// same moment but had not started its kill yet kills nothing.
func (t *Teardown) Disarm() bool {
	t.mu.Lock()
	if t.phase != PhaseRunning {
		t.mu.Unlock()
		return false
	}
	t.disarmed = true
	deadline, stopCtx := t.deadline, t.stopCtx
	t.deadline, t.stopCtx = nil, nil
	t.mu.Unlock()
	t.disarm(deadline, stopCtx)
	return true
}

// escalate SIGKILLs whatever is left of the tree after the grace period, even when the
// leader already exited: the tree may still have members.
func (t *Teardown) escalate() {
	defer t.timers.Done()
	t.tree.Escalate()
	close(t.escalated)
}

// Exited records that the leader exited, and how (ex's Code and Signal): the deadline
// and the context no longer kill, and the output gets at most the grace period to
// drain before Tree.Cut. Only the first call counts.
func (t *Teardown) Exited(ex Exit) {
	t.mu.Lock()
	switch t.phase {
	case PhaseRunning:
		t.phase = PhaseExited
	case PhaseKilling:
		t.phase = PhaseExitedKilling
	default:
		t.mu.Unlock()
		return
	}
	t.exit.Code, t.exit.Signal = ex.Code, ex.Signal
	deadline, stopCtx := t.deadline, t.stopCtx
	t.deadline, t.stopCtx = nil, nil
	t.timers.Add(1)
	t.drain = time.AfterFunc(t.grace, t.cutOutput)
	t.mu.Unlock()
	t.disarm(deadline, stopCtx)
}

// cutOutput ends the drain: the grace period after the leader's exit has passed.
func (t *Teardown) cutOutput() {
	defer t.timers.Done()
	t.mu.Lock()
	t.cut = true
	t.mu.Unlock()
	t.tree.Cut()
}

// disarm stops the deadline and the context hook, if they have not fired.
func (t *Teardown) disarm(deadline *time.Timer, stopCtx func() bool) {
	if deadline != nil && deadline.Stop() {
		t.timers.Done()
	}
	if stopCtx != nil && stopCtx() {
		t.timers.Done()
	}
}

// Settling ends the kills: the output is complete (or will never be: a lost remote
// leader), so from now on no kill is accepted, and the deadline, the context and the
// drain bound are disarmed. It returns the phase it left, which tells whether the
// leader exited (Phase.Exited) and whether a kill is under way (Phase.Killing).
func (t *Teardown) Settling() Phase {
	t.mu.Lock()
	from := t.phase
	if from >= PhaseSettling {
		t.mu.Unlock()
		return t.from
	}
	t.phase, t.from = PhaseSettling, from
	deadline, stopCtx, drain := t.deadline, t.stopCtx, t.drain
	t.deadline, t.stopCtx, t.drain = nil, nil, nil
	t.mu.Unlock()
	t.disarm(deadline, stopCtx)
	if drain != nil && drain.Stop() {
		t.timers.Done()
	}
	return from
}

// killedWait bounds the wait for a tree to be gone after its SIGKILL.
const killedWait = time.Second

// AwaitKill waits, after Settling, until the kill sequence, if one started, is over —
// the tree is gone (Tree.AwaitGone), or the escalation ran and then the tree is gone
// or killedWait passed — and no callback of the teardown runs any more. It reports whether the drain bound cut the output (Tree.Cut
// ran): something the leader left behind held it open.
func (t *Teardown) AwaitKill() (cut bool) {
	t.mu.Lock()
	killing := t.from.Killing()
	terminated, escalated, escalation, escalateAt := t.terminated, t.escalated, t.escalation, t.escalateAt
	t.mu.Unlock()
	if killing {
		<-terminated
		if t.tree.AwaitGone(escalateAt, escalated) && escalation.Stop() {
			t.timers.Done()
		} else {
			<-escalated
			// SIGKILL went out: what it reached dies at once, and is awaited (briefly,
			// for a process stuck in the kernel), so that the settled process leaves
			// nothing behind.
			t.tree.AwaitGone(time.Now().Add(killedWait), nil)
		}
	}
	t.timers.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cut
}

// Account records what the tree used and which limits it reached (Exit.Budget); the
// service calls it, when it accounts resources, before Settle.
func (t *Teardown) Account(b *Budget) {
	t.mu.Lock()
	t.exit.Budget = b
	t.mu.Unlock()
}

// Settle fixes the outcome, with err (when not nil) as the exit's Err, and closes Done.
func (t *Teardown) Settle(err error) {
	t.mu.Lock()
	t.exit.Err = err
	t.phase = PhaseSettled
	t.mu.Unlock()
	close(t.done)
}

// Abandon settles, as ended by reason, a process that never ran: there is no tree to
// kill and no output to drain. Only a process still in PhaseRunning can be abandoned.
func (t *Teardown) Abandon(reason Reason, cause error) {
	t.mu.Lock()
	t.exit.Reason, t.exit.Cause = reason, cause
	t.phase = PhaseSettled
	t.mu.Unlock()
	close(t.done)
}
