package mcpserve

import (
	"runtime"
	"testing"
)

// Once the ballast is parked, goroutines start with the stack a tool call needs, however
// many processors there are; once it is released, they start small again and the ballast
// is gone (the package's TestMain checks that no goroutine is left).
func TestStackBallastSetsTheStartingStack(t *testing.T) {
	if !adaptiveStackStart() {
		t.Skip("adaptive stack start is off: the ballast is not started")
	}
	stop := stackBallast()
	if got := startingStack(); got != callStack {
		t.Errorf("starting stack with the ballast (GOMAXPROCS %d): %d bytes, want %d", runtime.GOMAXPROCS(0), got, callStack)
	}
	stop()
	runtime.GC()
	if got := startingStack(); got >= callStack {
		t.Errorf("starting stack after the ballast: %d bytes, want less than %d", got, callStack)
	}
}
