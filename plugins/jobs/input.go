package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/dsh-dev/dsh/container"
)

// QuietAfterInput is how long a job's output must stay quiet after Write before its
// new output is read: a command that answers an input usually does so at once, and a
// prompt waiting for the next one writes nothing more.
const QuietAfterInput = 200 * time.Millisecond

// Write sends input to job id (the caller's, or an unowned one), ending its input after
// it with end, then waits until its output has been quiet for QuietAfterInput, wait has
// passed, or the job finished, and returns a consuming read as Read does. It fails
// without writing for a job that takes no input (ErrNoInput: "job <id> does not take
// input (start it with tty: true)") or has finished (ErrFinished: "job <id> has
// finished and takes no more input [status: …]"); a job whose input was closed gives
// ErrInputClosed. A done ctx ends the wait and consumes nothing.
func (r *Runtime) Write(ctx context.Context, caller *container.Session, id, input string, end bool, wait time.Duration) (Output, error) {
	return r.readAfter(caller, id, func(j *job) error {
		if err := r.writable(j); err != nil {
			return err
		}
		if err := j.hooks.Write(ctx, input, end); err != nil {
			return r.writeFailure(j, err)
		}
		return awaitQuiet(ctx, j, time.Now(), wait)
	})
}

// writable checks that j takes input now.
func (r *Runtime) writable(j *job) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case j.hooks.Write == nil:
		return errorf(ErrNoInput, "job %s does not take input (start it with tty: true)", j.id)
	case j.status.Terminal():
		return finished(j.snapshotLocked())
	}
	return nil
}

func finished(s Snapshot) error {
	return errorf(ErrFinished, "job %s has finished and takes no more input %s", s.ID, s.statusLine())
}

// writeFailure is the error of a write the work refused. Work that takes no more input
// has usually just finished: once it has settled (it does promptly: its input ended
// because it did), that is what the caller is told.
func (r *Runtime) writeFailure(j *job, err error) error {
	if !errors.Is(err, ErrInputClosed) {
		return errorf(err, "job %s: writing its input failed: %v", j.id, err)
	}
	t := time.NewTimer(settleAfterInput)
	defer t.Stop()
	select {
	case <-j.settled:
	case <-j.hooks.Done:
		<-j.settled // the watcher records the outcome right after Done
	case <-t.C:
		return errorf(ErrInputClosed, "job %s takes no more input: its input was closed", j.id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return finished(j.snapshotLocked())
}

// settleAfterInput bounds how long a job that refuses input is given to settle.
const settleAfterInput = 2 * time.Second

// awaitQuiet waits until j's output has been quiet for QuietAfterInput since written
// (or since its last output), wait passed, j finished, or ctx is done.
func awaitQuiet(ctx context.Context, j *job, written time.Time, wait time.Duration) error {
	deadline := written.Add(wait)
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for {
		last := written
		if j.hooks.LastOutput != nil {
			if at := j.hooks.LastOutput(); at.After(last) {
				last = at
			}
		}
		next := last.Add(QuietAfterInput)
		if next.After(deadline) {
			next = deadline
		}
		d := time.Until(next)
		if d <= 0 {
			return nil
		}
		t.Reset(d)
		select {
		case <-t.C:
		case <-j.settled:
			return nil
		case <-j.abandon:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
