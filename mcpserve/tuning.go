package mcpserve

import (
	"os"
	"runtime"
	"sync"
	"time"
)

// Tuning is everything dsh does on the serving path for speed alone, in one place. Each
// knob is off in the zero value and independent of the others; DefaultTuning turns on
// all of them. A Server applies StackBallast and CallStack from New to Close.
// FewerProcs changes the process-wide GOMAXPROCS, so no Server applies it: ApplyProcs
// does, and dsh's own main is what calls it; an embedder's processors are its own.
//
// Each knob was kept because an A/B still showed it pays: two dsh builds, with and
// without it, each serving stdio and driven alternately in one run, a tools/call of
// `true` at a time (BenchmarkServeTrue in cmd/dsh with DSH_BENCH_VS; 2000 paired calls
// a run, 7–10 runs, on 2 shared cores where such a call took 1.5–1.9 ms). The figures
// are the medians over the runs of each run's paired ratio, with against without; two
// builds of the same code differ by up to 0.5%.
//
// One measure is not a knob: after a process settles, the supervisor (package
// subprocess, Process.wait) yields the processor once, right after closing Done, so
// the call waiting for the result writes its response before the process's pipes are
// closed and its leader reaped. It changes no outcome and costs one scheduler call when
// nothing waits; it buys 0.5–1% (with against without: 0.994–0.997; without against
// with: 1.006–1.012).
type Tuning struct {
	// FewerProcs schedules the process's goroutines on a quarter of the processors Go
	// would use, at least one, unless GOMAXPROCS is set in the environment. dsh's own
	// work is moving bytes and JSON between pipes and a client; the processors are for
	// the commands it runs. With fewer Ps each call wakes fewer scheduler threads, which
	// on a small machine compete with the command for the CPU (on 2 cores: 10 context
	// switches per call with one P, 22 with two). Buys 2–3% per call: 0.979 with
	// against without (GOMAXPROCS=2), 0.967 in a run under a load average of 5–13.
	FewerProcs bool
	// StackBallast keeps (24 + 2 × GOMAXPROCS) goroutines parked on 14 KB frames while
	// the Server lives (416 KB with one P), from just after its first tools/call. Go starts a goroutine with the average stack
	// in use at the last collection; dsh's own goroutines are shallow, so the SDK's
	// goroutine for a request started at 2 KB and grew 2→4→8→16 KB, copying its stack
	// at each step. The ballast makes that average, and so every new goroutine's stack,
	// the 16 KB a call needs. It is not started under GODEBUG=adaptivestackstart=0.
	// Buys 1.2–1.8% per call (0.988; 0.982 under load), and still 0.6% once ten
	// background jobs' goroutines dilute it to 8 KB (0.994).
	StackBallast bool
	// CallStack grows a tools/call goroutine's stack to 16 KB in one step, while it is
	// still shallow, when new goroutines start smaller: without the ballast, or when
	// many goroutines (background jobs' readers) dilute it. Buys 1–1.5% per call
	// without the ballast (0.985; 0.991 under load) and 0.7–1% with it and ten jobs
	// running (0.990–0.993); with the ballast intact it checks one runtime metric and
	// does nothing (1.003, within the noise of two builds).
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

// ballastDelay is how long after the Server's first tools/call returned its stack
// ballast is set up: long enough for that call's result to be written first.
const ballastDelay = 50 * time.Millisecond

// ballastLife is the stack ballast of one Server (Tuning.StackBallast). It is set up
// after the Server's first tools/call (arm): its goroutines' stacks and the collection
// after take about 2 ms, which neither the first answer (initialize) nor the first
// result should wait for. end undoes it.
type ballastLife struct {
	on    bool
	mu    sync.Mutex
	ended bool
	timer *time.Timer // sets it up; nil until armed
	undo  chan func() // the set-up ballast's undo
}

func (t Tuning) ballast() *ballastLife { return &ballastLife{on: t.StackBallast} }

// arm sets the ballast up ballastDelay from now, once.
func (b *ballastLife) arm() {
	if !b.on {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended || b.timer != nil {
		return
	}
	b.undo = make(chan func(), 1)
	b.timer = time.AfterFunc(ballastDelay, func() { b.undo <- stackBallast() })
}

// end undoes the ballast, or keeps it from being set up.
func (b *ballastLife) end() {
	b.mu.Lock()
	b.ended = true
	timer, undo := b.timer, b.undo
	b.mu.Unlock()
	if timer == nil || timer.Stop() {
		return
	}
	(<-undo)()
}
