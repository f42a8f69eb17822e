package jobs_test

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/jobs"
)

// work is a fake producer: output is written by the test, cancellation finishes it as
// killed by SIGTERM unless ignoreCancel is set.
type work struct {
	mu           sync.Mutex
	pending      strings.Builder
	done         chan struct{}
	once         sync.Once
	outcome      jobs.Outcome
	cancels      atomic.Int32
	outcomeCalls atomic.Int32
	ignoreCancel bool
}

func newWork() *work { return &work{done: make(chan struct{})} }

func (w *work) write(s string) {
	w.mu.Lock()
	w.pending.WriteString(s)
	w.mu.Unlock()
}

func (w *work) finish(o jobs.Outcome) {
	w.once.Do(func() {
		w.mu.Lock()
		w.outcome = o
		w.mu.Unlock()
		close(w.done)
	})
}

func (w *work) hooks() jobs.Hooks {
	return jobs.Hooks{
		Cancel: func() {
			w.cancels.Add(1)
			if !w.ignoreCancel {
				w.finish(jobs.Outcome{Status: jobs.StatusKilled, Detail: "signal: SIGTERM"})
			}
		},
		Done: w.done,
		ReadOutput: func() string {
			w.mu.Lock()
			defer w.mu.Unlock()
			s := w.pending.String()
			w.pending.Reset()
			return s
		},
		Outcome: func() jobs.Outcome {
			w.outcomeCalls.Add(1)
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.outcome
		},
	}
}

func (w *work) run() (jobs.Hooks, error) { return w.hooks(), nil }

// notices records completion notices.
type notices struct{ proctest.Record }

func (n *notices) Notify(text string) { n.Add(text) }

func session(id string) (*container.Session, *notices) {
	n := &notices{}
	return &container.Session{ID: id, Cwd: "/", Notifier: n}, n
}

// waitFor polls cond until it holds, failing t after d.
var waitFor = proctest.WaitFor
