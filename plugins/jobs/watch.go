package jobs

import (
	"errors"
	"fmt"
	"slices"

	"github.com/dsh-dev/dsh/container"
)

// Change is what happened to a job: it started or it finished.
type Change string

// The changes a Watcher is told about.
const (
	// Started: the job was registered and runs.
	Started Change = "started"
	// Finished: its outcome was recorded (Snapshot.Status is terminal).
	Finished Change = "finished"
)

// Watcher is told about every job start and finish of a runtime (the audit log). It
// runs on the goroutine that started or settled the job, after the runtime recorded
// it: it must not block, and must be safe for concurrent use. A panic is logged.
type Watcher func(change Change, job Snapshot)

// watcher is a registered Watcher.
type watcher struct{ fn Watcher }

// Watch adds w for as long as scope's activation lasts.
func (r *Runtime) Watch(scope container.Scope, w Watcher) error {
	if w == nil {
		return errors.New("jobs: a watcher needs a function")
	}
	wp := &watcher{fn: w}
	r.mu.Lock()
	// Copy on write: an announcement in flight keeps the list it read.
	r.watching = append(slices.Clone(r.watching), wp)
	r.mu.Unlock()
	scope.Defer(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.watching = slices.DeleteFunc(slices.Clone(r.watching), func(x *watcher) bool { return x == wp })
	})
	return nil
}

// announce tells the watchers of the moment about a change; nothing when there are
// none.
func (r *Runtime) announce(watching []*watcher, change Change, job Snapshot) {
	for _, w := range watching {
		func() {
			defer func() {
				if p := recover(); p != nil {
					r.opts.Logger.Error("jobs: a watcher panicked", "job", job.ID, "panic", fmt.Sprint(p))
				}
			}()
			w.fn(change, job)
		}()
	}
}
