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
	mu      sync.Mutex
	settled bool
	undo    []func()
}

type settlementKey struct{}

// withSettlement returns ctx carrying a new settlement for one call.
func withSettlement(ctx context.Context) (context.Context, *settlement) {
	s := &settlement{}
	return context.WithValue(ctx, settlementKey{}, s), s
}

// settle fixes the call's outcome: aborted runs the undo functions (in the order they
// were registered), otherwise they are dropped. It reports whether any ran.
func (s *settlement) settle(aborted bool) (undone bool) {
	s.mu.Lock()
	s.settled = true
	undo := s.undo
	s.undo = nil
	s.mu.Unlock()
	if !aborted {
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
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.settled {
		return false
	}
	s.undo = append(s.undo, undo)
	return true
}
