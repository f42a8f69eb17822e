package mcpserve

import (
	"os"
	"runtime"
)

// Tuning is everything dsh does on the serving path for speed alone, in one place. Each
// knob is off in the zero value and independent of the others; its comment says what it
// buys, measured through `dsh serve` over stdio (a tools/call of `true`, the binary with
// and without the knob driven alternately in one run). DefaultTuning turns on all of them.
//
// A Server applies StackBallast and CallStack from New to Close. FewerProcs changes the
// process-wide GOMAXPROCS, so no Server applies it: ApplyProcs does, and dsh's own main
// is what calls it; an embedder's processors are its own.
type Tuning struct {
	// FewerProcs schedules the process's goroutines on a quarter of the processors Go
	// would use, at least one, unless GOMAXPROCS is set in the environment. dsh's own
	// work is moving bytes and JSON between pipes and a client; the processors are for
	// the commands it runs. With fewer Ps each call wakes fewer scheduler threads, which
	// on a small machine compete with the command for the CPU: on 2 cores a call of
	// `true` made 10 context switches with one P against 22 with two, and its ratio to a
	// raw exec was 0.05–0.07 lower.
	FewerProcs bool
	// StackBallast keeps (24 + 2 × GOMAXPROCS) goroutines parked on 14 KB frames while
	// the Server lives. Go starts a goroutine with the average stack in use at the last
	// collection; dsh's own goroutines are shallow, so the SDK's goroutine for a request
	// started at 2 KB and grew 2→4→8→16 KB, copying its stack at each step. The ballast
	// makes that average, and so every new goroutine's stack, the 16 KB a call needs. It
	// is not started under GODEBUG=adaptivestackstart=0, and it costs 416 KB with one P.
	StackBallast bool
	// CallStack grows a tools/call goroutine's stack to 16 KB in one step, while it is
	// still shallow, when new goroutines start smaller (when hundreds of goroutines —
	// jobs' readers — dilute the ballast's average, or without the ballast). Together
	// with StackBallast: 28–46 µs less per call.
	CallStack bool
}

// DefaultTuning is what `dsh serve` uses: every knob on.
func DefaultTuning() Tuning {
	return Tuning{FewerProcs: true, StackBallast: true, CallStack: true}
}

// ApplyProcs applies FewerProcs to this process: it sets GOMAXPROCS to a quarter of its
// value (at least one) when FewerProcs is on and the environment does not set
// GOMAXPROCS. Call it first thing in main, and only from a main that owns the process.
func (t Tuning) ApplyProcs() {
	if t.FewerProcs && os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(procs(runtime.GOMAXPROCS(0)))
	}
}

// procs is how many processors FewerProcs leaves of the n Go would use.
func procs(n int) int { return max(1, n/4) }

// start applies the knobs a Server owns; stop undoes them.
func (t Tuning) start() (stop func()) {
	if t.StackBallast {
		return stackBallast()
	}
	return func() {}
}
