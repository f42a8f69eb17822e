package mcpserve

import (
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
)

// The stack measures of Tuning (StackBallast, CallStack): the SDK serves each request on
// a fresh goroutine, which Go starts with the average stack in use at the last
// collection (adaptive stack start, on by default).
const (
	callStack    = 16 << 10 // what a tool call's goroutine needs
	ballastFrame = 14 << 10 // with the runtime's guard, the whole of a 16 KB stack
)

// ballastCount outweighs the shallow goroutines of an idle server: its own (about 20)
// and the runtime's (a mark worker per P).
func ballastCount() int { return 24 + 2*runtime.GOMAXPROCS(0) }

// stackBallast parks ballastCount goroutines on ballastFrame-byte frames until stop,
// and collects once they are parked, so that the first calls already start with the
// larger stack. It does nothing when adaptive stack start is turned off.
func stackBallast() (stop func()) {
	if !adaptiveStackStart() {
		return func() {}
	}
	n := ballastCount()
	release := make(chan struct{})
	parked := make(chan struct{}, n)
	var ballast sync.WaitGroup
	for range n {
		ballast.Go(func() { parkDeep(parked, release) })
	}
	for range n {
		<-parked
	}
	runtime.GC()
	return func() {
		close(release)
		ballast.Wait()
	}
}

// adaptiveStackStart reports whether Go starts goroutines with the average stack in use
// (GODEBUG adaptivestackstart, on unless turned off).
func adaptiveStackStart() bool {
	return !strings.Contains(os.Getenv("GODEBUG"), "adaptivestackstart=0")
}

//go:noinline
func parkDeep(parked chan<- struct{}, release <-chan struct{}) byte {
	var frame [ballastFrame]byte
	parked <- struct{}{}
	<-release
	return lastByte(frame[:])
}

// startingStack is the stack new goroutines start with, or 0 if the runtime does not
// say.
func startingStack() uint64 {
	s := []metrics.Sample{{Name: "/gc/stack/starting-size:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// ensureCallStack grows the calling goroutine's stack to what a tool call needs, in one
// step, unless new goroutines start with that much already.
func ensureCallStack() {
	if startingStack() < callStack {
		growStack()
	}
}

//go:noinline
func growStack() byte {
	var frame [callStack]byte
	return lastByte(frame[:])
}

//go:noinline
func lastByte(b []byte) byte { return b[len(b)-1] }
