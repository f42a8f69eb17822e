package cli

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func startingStack() uint64 {
	s := []metrics.Sample{{Name: stackStartName}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// While the ballast is parked, goroutines start with the stack a tool call needs (as
// computed at the next collection); once it is released, they start small again and
// the ballast is gone (the package's TestMain checks that no goroutine is left).
func TestStackBallastSetsTheStartingStack(t *testing.T) {
	stop := stackBallast()
	// The ballast counts once its goroutines have run to their frames.
	got := uint64(0)
	for deadline := time.Now().Add(10 * time.Second); got != callStack && time.Now().Before(deadline); {
		runtime.Gosched()
		runtime.GC()
		got = startingStack()
	}
	if got != callStack {
		t.Errorf("starting stack with the ballast: %d bytes, want %d", got, callStack)
	}
	stop()
	runtime.GC()
	if got := startingStack(); got >= callStack {
		t.Errorf("starting stack after the ballast: %d bytes, want less than %d", got, callStack)
	}
}
