package cli

import (
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
)

// The SDK serves each request on a fresh goroutine, which Go starts with the average
// stack in use at the last collection (adaptive stack start, on by default). dsh's own
// goroutines are shallow, so that average is the 2 KB minimum, and a tools/call goroutine
// grew 2→4→8→16 KB as the call deepened, its stack copied (each frame adjusted) at every
// step: about 20 µs of each call, the last copies the deepest. Two measures:
//
//   - stackBallast keeps goroutines parked on deep frames while dsh serves, which makes
//     the average, and so every new goroutine's stack, 16 KB: enough for a whole call.
//     Once many goroutines run (hundreds of jobs' readers) the average falls back, and
//   - ensureCallStack then gives the call its stack in one step, while it is shallow.
//
// Measured through `dsh serve` (a call of `true`, alternating with and without): 28–46 µs
// less per call; the ballast holds (24 + 2 × GOMAXPROCS) × 16 KB.
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
