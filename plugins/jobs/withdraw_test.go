package jobs_test

import (
	"errors"
	"testing"

	"github.com/dsh-dev/dsh/plugins/jobs"
)

// Withdraw undoes a start nobody will learn of: the job is cancelled and waited for,
// then gone — no listing shows it, no notice is sent, its slot is free again — and its
// id is not used again.
func TestWithdrawUndoesAStart(t *testing.T) {
	rt := newRuntime(t, jobs.Options{MaxConcurrentPerOwner: 1})
	s, notes := session("s1")
	w, snap := start(t, rt, "bash", "sleep 300", s)
	rt.Withdraw(snap.ID)
	if w.cancels.Load() != 1 {
		t.Errorf("cancelled %d times, want once", w.cancels.Load())
	}
	if _, err := rt.Get(s, snap.ID); !errors.Is(err, jobs.ErrUnknownJob) {
		t.Errorf("Get after Withdraw: %v", err)
	}
	if got := rt.List(s); len(got) != 0 {
		t.Errorf("listed after Withdraw: %+v", got)
	}
	_, next := start(t, rt, "bash", "true", s) // the owner's one slot is free
	if next.ID != "bash-2" {
		t.Errorf("the next job is %s, want bash-2", next.ID)
	}
	rt.Withdraw("bash-99") // unknown: nothing happens
	if got := notes.All(); len(got) != 0 {
		t.Errorf("notices: %q", got)
	}
}
