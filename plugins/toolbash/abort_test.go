package toolbash_test

import (
	"context"
	"encoding/json"
	"testing"
)

// A background start whose call is cancelled while it starts — the job registered, the
// answer not yet settled — ends aborted, and the job goes with it: killed, not listed,
// its slot free. One the cancellation reaches after it settled is answered and runs.
func TestCancelledBackgroundStartLeavesNoJob(t *testing.T) {
	h := newHarness(t, setup{})
	s, notes := newSession("s1", "/w")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.exec.onExecute = cancel // the client's cancellation arrives while the job starts
	res := h.tools.Call(ctx, "bash", json.RawMessage(bgSleep), s)
	if res.Text != "Error: tool call aborted" || !res.IsError || res.Value != nil {
		t.Fatalf("a start cancelled meanwhile: %+v", res)
	}
	if e := h.exec.execution(t, 0); !isDone(e) {
		t.Error("the withdrawn job's command is still running")
	}
	expect(t, h.callTool(t, s, "job_list", `{}`), "(no background jobs)", false)

	h.exec.onExecute = nil
	for i := range 10 { // the default per-owner limit: no slot is held by the withdrawn job
		if res := h.call(t, s, bgSleep); res.IsError {
			t.Fatalf("start %d after the withdrawn one: %q", i, res.Text)
		}
	}
	if got := notes.get(); len(got) != 0 {
		t.Errorf("notices: %q", got)
	}
}
