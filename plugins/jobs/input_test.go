package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/plugins/jobs"
)

// terminalWork is a fake producer that takes input: each input is answered with its
// upper-case form, as a terminal program would (through answer, when set).
type terminalWork struct {
	*work
	mu     sync.Mutex
	inputs []string
	closed bool
	last   time.Time
	answer func(input string) string
	// refused, when set, runs (in its own goroutine) when a write is refused.
	refused func()
}

func newTerminalWork() *terminalWork {
	return &terminalWork{work: newWork(), answer: strings.ToUpper}
}

func (w *terminalWork) run() (jobs.Hooks, error) {
	h := w.hooks()
	h.Write = func(_ context.Context, input string, end bool) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.closed {
			if w.refused != nil {
				go w.refused()
			}
			return fmt.Errorf("terminal: %w", jobs.ErrInputClosed)
		}
		w.inputs = append(w.inputs, input)
		w.closed = end
		if out := w.answer(input); out != "" {
			w.write(out)
			w.last = time.Now()
		}
		return nil
	}
	h.LastOutput = func() time.Time {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.last
	}
	return h, nil
}

func TestJobWrite(t *testing.T) {
	h := compose(t, nil)
	s, notes := session("s1")
	w := newTerminalWork()
	if _, err := h.jobs.Start(jobs.Spec{Kind: "bash", Label: "python3 -i", Owner: s, Run: w.run}); err != nil {
		t.Fatal(err)
	}
	w.write(">>> ")
	begin := time.Now()
	expect(t, h.call(t, s, "job_write", `{"job_id":"bash-1","input":"1+1\n"}`), ">>> 1+1\n[status: running]", false)
	if took := time.Since(begin); took < jobs.QuietAfterInput || took > 5*time.Second {
		t.Errorf("job_write returned after %s; want the output quiet for %s first", took, jobs.QuietAfterInput)
	}
	// An empty input only waits and reads; wait_ms bounds the wait.
	begin = time.Now()
	expect(t, h.call(t, s, "job_write", `{"job_id":"bash-1","input":"","wait_ms":0}`), "(no new output)\n[status: running]", false)
	if time.Since(begin) > jobs.QuietAfterInput {
		t.Error("wait_ms 0 waited for quiet")
	}
	// Output that keeps coming: wait_ms ends the wait.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				w.mu.Lock()
				w.write(".")
				w.last = time.Now()
				w.mu.Unlock()
			}
		}
	}()
	begin = time.Now()
	res := h.call(t, s, "job_write", `{"job_id":"bash-1","input":"x","wait_ms":400}`)
	took := time.Since(begin)
	close(stop)
	wg.Wait()
	h.call(t, s, "job_output", `{"job_id":"bash-1"}`) // the dots written after it returned
	if took < 400*time.Millisecond || took > 5*time.Second || !strings.HasPrefix(res.Text, "X") || !strings.HasSuffix(res.Text, "\n[status: running]") {
		t.Errorf("job_write with output that keeps coming: %q after %s", res.Text, took)
	}
	// close ends the input: later writes are refused.
	expect(t, h.call(t, s, "job_write", `{"job_id":"bash-1","input":"bye","close":true,"wait_ms":0}`), "BYE\n[status: running]", false)
	expect(t, h.call(t, s, "job_write", `{"job_id":"bash-1","input":"more"}`), "Error: job bash-1 takes no more input: its input was closed", true)
	if got := strings.Join(w.inputs, "|"); got != "1+1\n||x|bye" {
		t.Errorf("inputs %q", got)
	}
	// A job that finishes while job_write waits: the wait ends, the status is final,
	// and no completion notice follows (the read reported it).
	w2 := newTerminalWork()
	w2.answer = func(string) string { return "" }
	h.jobs.Start(jobs.Spec{Kind: "bash", Label: "read x", Owner: s, Run: w2.run})
	go func() {
		waitFor(t, 10*time.Second, "the input", func() bool { w2.mu.Lock(); defer w2.mu.Unlock(); return len(w2.inputs) == 1 })
		w2.write("done\n")
		w2.finish(jobs.Outcome{Status: jobs.StatusCompleted, Detail: "exit code: 0"})
	}()
	expect(t, h.call(t, s, "job_write", `{"job_id":"bash-2","input":"y\n","wait_ms":30000}`), "done\n[status: completed, exit code: 0]", false)
	expect(t, h.call(t, s, "job_write", `{"job_id":"bash-2","input":"y\n"}`), "Error: job bash-2 has finished and takes no more input [status: completed, exit code: 0]", true)
	if n := notes.All(); len(n) != 0 {
		t.Errorf("notices %q", n)
	}
}

// A job that refuses input because it just finished reports that it finished.
func TestJobWriteRacesTheEnd(t *testing.T) {
	h := compose(t, nil)
	s, _ := session("s1")
	w := newTerminalWork()
	h.jobs.Start(jobs.Spec{Kind: "bash", Label: "true", Owner: s, Run: w.run})
	w.mu.Lock()
	w.closed = true // the terminal is gone; the job ends as the write is refused
	w.refused = func() { w.finish(jobs.Outcome{Status: jobs.StatusKilled, Detail: "signal: SIGHUP"}) }
	w.mu.Unlock()
	expect(t, h.call(t, s, "job_write", `{"job_id":"bash-1","input":"x"}`), "Error: job bash-1 has finished and takes no more input [status: killed, signal: SIGHUP]", true)
}

func TestJobWriteRefusals(t *testing.T) {
	h := compose(t, nil)
	s, _ := session("s1")
	other, _ := session("s2")
	plain := newWork()
	h.jobs.Start(jobs.Spec{Kind: "bash", Label: "sleep 60", Owner: s, Run: plain.run})
	tw := newTerminalWork()
	h.jobs.Start(jobs.Spec{Kind: "bash", Label: "bash -i", Owner: s, Run: tw.run})
	expect(t, h.call(t, s, "job_write", `{"job_id":"bash-1","input":"x"}`), "Error: job bash-1 does not take input (start it with tty: true)", true)
	plain.finish(jobs.Outcome{Status: jobs.StatusCompleted, Detail: "exit code: 0"})
	waitFor(t, 10*time.Second, "the outcome", func() bool { s, _ := h.jobs.Get(s, "bash-1"); return s.Status.Terminal() })
	expect(t, h.call(t, s, "job_write", `{"job_id":"bash-1","input":"x"}`), "Error: job bash-1 does not take input (start it with tty: true)", true)
	expect(t, h.call(t, other, "job_write", `{"job_id":"bash-2","input":"x"}`), "Error: job bash-2 belongs to another session", true)
	expect(t, h.call(t, s, "job_write", `{"job_id":"bash-9","input":"x"}`), "Error: unknown job bash-9", true)
	expect(t, h.call(t, s, "job_write", `{"job_id":"","input":"x"}`), `Error: invalid job_id: expected a non-empty string, got ""`, true)
	expect(t, h.call(t, s, "job_write", `{"job_id":"bash-2"}`), `Error: missing required property "input"`, true)
	expect(t, h.call(t, s, "job_write", `{"job_id":"bash-2","input":3}`), `Error: "input" must be a string`, true)
	expect(t, h.call(t, s, "job_write", `{"job_id":"bash-2","input":"","close":"yes"}`), `Error: "close" must be a boolean`, true)
	expect(t, h.call(t, s, "job_write", `{"job_id":"bash-2","input":"","wait_ms":-1}`), `Error: invalid wait_ms: expected a non-negative number, got -1`, true)
	if len(tw.inputs) != 0 {
		t.Errorf("a refused call wrote %q", tw.inputs)
	}
}
