package tools_test

import (
	"context"
	"testing"

	"github.com/dsh-dev/dsh/plugins/tools"
)

// What a tool registers with OnAbort is undone, once and before the call returns, when
// the call's context is cancelled before it settles — and the aborted result then
// carries no value naming it; a call that settles first keeps it, and registering
// after settling, or outside a call, is refused.
func TestOnAbortUndoesWhatAnAbortedCallDid(t *testing.T) {
	reg := tools.NewRegistry()
	undone := 0
	var late func() bool
	var cancelCall context.CancelFunc // the call cancels itself mid-way, as a client's cancellation would
	exec := func(ctx context.Context, call tools.Call) (tools.Result, error) {
		if !tools.OnAbort(ctx, func() { undone++ }) {
			t.Error("OnAbort refused inside a call")
		}
		late = func() bool { return tools.OnAbort(ctx, func() { undone += 100 }) }
		if cancelCall != nil {
			cancelCall()
		}
		if call.Args["panic"] == true {
			panic("boom")
		}
		return tools.Result{Text: "started job-1", Value: map[string]string{"jobId": "job-1"}}, nil
	}
	schema := &tools.Schema{Type: "object", Properties: tools.Properties{{Name: "panic", Schema: &tools.Schema{Type: "boolean"}}}}
	if err := reg.Register(scope{}, tools.Tool{Name: "start", InputSchema: schema, Execute: exec}); err != nil {
		t.Fatal(err)
	}
	if tools.OnAbort(context.Background(), func() {}) {
		t.Error("OnAbort accepted outside any call")
	}

	res := reg.CallMap(context.Background(), "start", map[string]any{}, nil)
	if res.Text != "started job-1" || res.Value == nil || undone != 0 {
		t.Errorf("a settled call: %+v, undone %d", res, undone)
	}
	if late() {
		t.Error("OnAbort accepted after the call settled")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelCall = cancel
	res = reg.CallMap(ctx, "start", map[string]any{}, nil)
	cancelCall = nil
	if res.Text != "Error: tool call aborted" || !res.IsError || res.Value != nil || undone != 1 {
		t.Errorf("an aborted call: %+v, undone %d; want the abort, no value, undone once", res, undone)
	}

	res = reg.CallMap(context.Background(), "start", map[string]any{"panic": true}, nil)
	if !res.IsError || undone != 2 {
		t.Errorf("a panicking call: %+v, undone %d; want it undone", res, undone)
	}
}

// Under HoldAborts a call that settles as succeeded hands what it registered to the
// holder: undone when its answer was not delivered, dropped when it was.
func TestHoldAbortsDecidesAfterTheCall(t *testing.T) {
	reg := tools.NewRegistry()
	undone := 0
	exec := func(ctx context.Context, call tools.Call) (tools.Result, error) {
		tools.OnAbort(ctx, func() { undone++ })
		return tools.Result{Text: "started job-1"}, nil
	}
	if err := reg.Register(scope{}, tools.Tool{Name: "start", InputSchema: &tools.Schema{Type: "object"}, Execute: exec}); err != nil {
		t.Fatal(err)
	}
	for _, delivered := range []bool{true, false} {
		undone = 0
		ctx, release := tools.HoldAborts(context.Background())
		if res := reg.CallMap(ctx, "start", map[string]any{}, nil); res.Text != "started job-1" || undone != 0 {
			t.Fatalf("the call under a hold: %+v, undone %d", res, undone)
		}
		release(delivered)
		if want := map[bool]int{true: 0, false: 1}[delivered]; undone != want {
			t.Errorf("released with delivered=%v: undone %d times, want %d", delivered, undone, want)
		}
		if tools.OnAbort(ctx, func() {}) {
			t.Error("OnAbort accepted after the hold was released")
		}
	}
}
