package proc_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/proc"
)

// fakeTree counts what a Teardown does to it; it is gone once gone is closed.
type fakeTree struct {
	gone chan struct{}

	mu                 sync.Mutex
	terms, kills, cuts int
}

func newFakeTree() *fakeTree { return &fakeTree{gone: make(chan struct{})} }

func (f *fakeTree) Terminate() { f.count(&f.terms) }
func (f *fakeTree) Escalate()  { f.count(&f.kills) }
func (f *fakeTree) Cut()       { f.count(&f.cuts) }

func (f *fakeTree) AwaitGone(escalateAt time.Time, escalated <-chan struct{}) bool {
	t := time.NewTimer(time.Until(escalateAt))
	defer t.Stop()
	select {
	case <-f.gone:
		return true
	case <-escalated:
	case <-t.C:
	}
	return false
}

func (f *fakeTree) count(n *int) {
	f.mu.Lock()
	*n++
	f.mu.Unlock()
}

func (f *fakeTree) counts() (terms, kills, cuts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.terms, f.kills, f.cuts
}

func newTeardown(grace time.Duration) (*proc.Teardown, *fakeTree) {
	tree := newFakeTree()
	t := &proc.Teardown{}
	t.Init(grace, tree)
	return t, tree
}

// settle runs the settling steps of an owner whose output is complete.
func settle(t *proc.Teardown) (from proc.Phase, cut bool) {
	from = t.Settling()
	cut = t.AwaitKill()
	t.Settle(nil)
	return from, cut
}

// A kill sends one SIGTERM however often it is asked for, records the first cause,
// and escalates after the grace period when the tree is still there; the exit is the
// leader's, with the kill's reason.
func TestTeardownKillEscalatesOnce(t *testing.T) {
	td, tree := newTeardown(20 * time.Millisecond)
	if ex, ok := td.Exit(); ok || ex != (proc.Exit{}) || td.State() != proc.Running {
		t.Fatalf("before settling: %+v %v %v", ex, ok, td.State())
	}
	if !td.Kill(proc.ReasonKill, errKilled, true) || !td.Kill(proc.ReasonTimeout, nil, false) {
		t.Fatal("Kill = false while running")
	}
	proctest.WaitFor(t, 10*time.Second, "the escalation", func() bool { _, kills, _ := tree.counts(); return kills == 1 })
	td.Exited(proc.Signaled(9))
	from, cut := settle(td)
	if terms, kills, cuts := tree.counts(); terms != 1 || kills != 1 || cuts != 0 || cut {
		t.Errorf("SIGTERMs %d, SIGKILLs %d, cuts %d (cut %v)", terms, kills, cuts, cut)
	}
	ex, ok := td.Exit()
	if !ok || from != proc.PhaseExitedKilling || ex.Signal != "SIGKILL" || ex.Reason != proc.ReasonKill || !errors.Is(ex.Cause, errKilled) || ex.State() != proc.Killed {
		t.Errorf("from %v, exit %+v %v", from, ex, ok)
	}
	if td.Kill(proc.ReasonKill, nil, true) {
		t.Error("Kill = true after settling")
	}
	select {
	case <-td.Done():
	default:
		t.Error("Done not closed")
	}
}

var errKilled = errors.New("killed")

// A tree found gone settles without waiting out the grace period, and is not
// SIGKILLed.
func TestTeardownGoneTreeSettlesAtOnce(t *testing.T) {
	td, tree := newTeardown(time.Hour)
	td.Kill(proc.ReasonKill, nil, true)
	close(tree.gone)
	td.Exited(proc.Signaled(15))
	begin := time.Now()
	settle(td)
	if terms, kills, _ := tree.counts(); terms != 1 || kills != 0 || time.Since(begin) > 10*time.Second {
		t.Errorf("SIGTERMs %d, SIGKILLs %d, after %v", terms, kills, time.Since(begin))
	}
}

// After the leader exited, the output gets the grace period, then the reading is cut;
// a deadline or a context no longer kill, an explicit kill still ends what is left
// but the exit stays the leader's own.
func TestTeardownDrainAndKillsAfterExit(t *testing.T) {
	td, tree := newTeardown(20 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	td.Arm(ctx, time.Now().Add(time.Hour), nil)
	td.Exited(proc.Exited(3))
	cancel()
	if td.Kill(proc.ReasonTimeout, nil, false) {
		t.Error("a deadline's kill was accepted after the exit")
	}
	proctest.WaitFor(t, 10*time.Second, "the drain bound", func() bool { _, _, cuts := tree.counts(); return cuts == 1 })
	if !td.Kill(proc.ReasonKill, nil, true) {
		t.Error("an explicit kill was refused after the exit")
	}
	close(tree.gone)
	from, cut := settle(td)
	ex, _ := td.Exit()
	if terms, _, _ := tree.counts(); terms != 1 || !cut || from != proc.PhaseExitedKilling || proctest.Code(ex) != 3 || ex.Reason != proc.ReasonNone || ex.State() != proc.Completed {
		t.Errorf("SIGTERMs %d, cut %v, from %v, exit %+v", terms, cut, from, ex)
	}
}

// The first cause of a kill wins: a deadline that passes reports a timeout with its
// cause, a context cancelled afterwards changes nothing.
func TestTeardownArmFirstCauseWins(t *testing.T) {
	errLate := errors.New("deadline")
	td, tree := newTeardown(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	td.Arm(ctx, time.Now(), errLate)
	proctest.WaitFor(t, 10*time.Second, "the deadline's kill", func() bool { terms, _, _ := tree.counts(); return terms == 1 })
	cancel()
	close(tree.gone)
	td.Exited(proc.Signaled(15))
	settle(td)
	if ex, _ := td.Exit(); ex.Reason != proc.ReasonTimeout || !errors.Is(ex.Cause, errLate) {
		t.Errorf("exit %+v", ex)
	}

	td, tree = newTeardown(time.Hour)
	ctx, cancelCause := context.WithCancelCause(context.Background())
	td.Arm(ctx, time.Time{}, nil)
	stop := errors.New("stop")
	cancelCause(stop)
	proctest.WaitFor(t, 10*time.Second, "the context's kill", func() bool { terms, _, _ := tree.counts(); return terms == 1 })
	close(tree.gone)
	td.Exited(proc.Signaled(15))
	settle(td)
	if ex, _ := td.Exit(); ex.Reason != proc.ReasonAbort || !errors.Is(ex.Cause, stop) {
		t.Errorf("exit %+v", ex)
	}
}

// A process whose leader's exit is never known (a lost connection) settles with the
// failure as its Err, killed; one that never ran is abandoned with its reason.
func TestTeardownLostAndAbandoned(t *testing.T) {
	td, _ := newTeardown(time.Hour)
	if !td.LeaderRuns() {
		t.Fatal("LeaderRuns = false while running")
	}
	from := td.Settling()
	if !td.LeaderRuns() || from != proc.PhaseRunning {
		t.Errorf("settling from %v: LeaderRuns = false", from)
	}
	lost := errors.New("lost")
	td.AwaitKill()
	td.Settle(lost)
	if ex, ok := td.Exit(); !ok || ex.Err != lost || ex.State() != proc.Killed || td.LeaderRuns() {
		t.Errorf("exit %+v %v", ex, ok)
	}

	td, _ = newTeardown(time.Hour)
	td.Abandon(proc.ReasonTimeout, nil)
	if ex, ok := td.Exit(); !ok || ex.Reason != proc.ReasonTimeout || ex.State() != proc.Killed || td.Kill(proc.ReasonKill, nil, true) {
		t.Errorf("abandoned: exit %+v %v", ex, ok)
	}
}

func TestExitConstructors(t *testing.T) {
	if ex := proc.WaitExit(0, 15); ex.Signal != "SIGTERM" || ex.Code != nil {
		t.Errorf("WaitExit(0, 15) = %+v", ex)
	}
	if ex := proc.WaitExit(4, 0); proctest.Code(ex) != 4 || ex.Signal != "" || ex.State() != proc.Completed {
		t.Errorf("WaitExit(4, 0) = %+v", ex)
	}
	if name := proc.SignalName(200); name != "SIG200" {
		t.Errorf("SignalName(200) = %q", name)
	}
}

// Disarm takes back the deadline and the context: neither kills afterwards, an explicit
// Kill still does; once a kill started (or the leader exited) it is too late.
func TestDisarm(t *testing.T) {
	td, tree := newTeardown(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	td.Arm(ctx, time.Now().Add(20*time.Millisecond), errors.New("deadline"))
	if !td.Disarm() {
		t.Fatal("Disarm of a running process")
	}
	cancel()
	td.Arm(ctx, time.Now(), nil)       // arming again after Disarm arms nothing
	time.Sleep(100 * time.Millisecond) // past the deadline: nothing may happen
	if terms, _, _ := tree.counts(); terms != 0 || td.State() != proc.Running {
		t.Fatalf("a disarmed teardown killed: %d SIGTERMs", terms)
	}
	if !td.Kill(proc.ReasonKill, nil, true) || td.Disarm() {
		t.Error("an explicit Kill after Disarm, then Disarm during the kill")
	}

	td, _ = newTeardown(time.Hour)
	td.Exited(proc.Exited(0))
	if td.Disarm() {
		t.Error("Disarm after the leader exited")
	}
}
