package tools

import (
	"context"
	"sync"
)

// A call's settlement: whether its result reaches the caller as what the tool did, or
// as "tool call aborted" because the call's context was cancelled first. The Registry
// settles each call right after Execute returns, on the context's state at that moment.
// What a tool did for its caller that must not outlive an aborted result — a
// background job whose id the caller will never learn — is undone then (OnAbort).
type settlement struct {
	parent *settlement // the one ctx carried already (HoldAborts, an outer call), if any

	mu      sync.Mutex
	settled bool
	undo    []func()
}

type settlementKey struct{}

// withSettlement returns ctx carrying a new settlement for one call.
func withSettlement(ctx context.Context) (context.Context, *settlement) {
	parent, _ := ctx.Value(settlementKey{}).(*settlement)
	s := &settlement{parent: parent}
	return context.WithValue(ctx, settlementKey{}, s), s
}

// settle fixes the call's outcome: aborted runs the undo functions (in the order they
// were registered); otherwise they pass to the parent settlement, which decides later
// (they are dropped when there is none, or it has settled). It reports whether any ran.
func (s *settlement) settle(aborted bool) (undone bool) {
	s.mu.Lock()
	s.settled = true
	undo := s.undo
	s.undo = nil
	s.mu.Unlock()
	if !aborted {
		for _, fn := range undo {
			if s.parent != nil {
				s.parent.register(fn)
			}
		}
		return false
	}
	for _, fn := range undo {
		fn()
	}
	return len(undo) > 0
}

// OnAbort registers undo to run if the call that ctx belongs to ends aborted — its
// context is cancelled before the Registry settles it, so that its result says "tool
// call aborted" and, over MCP, may never be sent. A tool that started something its
// caller must learn of to control (a background job) undoes it this way, so that a
// cancellation racing the start never leaves what nobody knows of. undo runs before the
// call returns. OnAbort reports false, registering nothing, when ctx belongs to no call
// of a Registry or the call has settled: the tool then decides by ctx alone.
func OnAbort(ctx context.Context, undo func()) bool {
	s, ok := ctx.Value(settlementKey{}).(*settlement)
	return ok && s.register(undo)
}

// register adds undo unless s has settled.
func (s *settlement) register(undo func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.settled {
		return false
	}
	s.undo = append(s.undo, undo)
	return true
}

// HoldAborts is for a transport that learns only after a call returns whether its
// answer reached the caller (an HTTP response the client may hang up on). Calls made
// under the returned context that settle as succeeded hand what they registered with
// OnAbort to it rather than dropping it; release(false) — the answer was not delivered
// — undoes that, release(true) drops it. release is called once, after the calls.
func HoldAborts(ctx context.Context) (_ context.Context, release func(delivered bool)) {
	ctx, s := withSettlement(ctx)
	return ctx, func(delivered bool) { s.settle(!delivered) }
}
