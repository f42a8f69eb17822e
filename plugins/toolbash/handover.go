package toolbash

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/jobs"
	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/shell"
)

// A foreground command can become a job of its session without a restart — the seed's
// "keeps running as the job it already was": with the jobs plugin and background
// enabled, a tty command whose output has been quiet for inputWaitMs while it waits for
// input (its foreground process blocked reading the terminal; remotely, where that
// cannot be seen, quiet output that does not end in a newline), and, with onTimeout:
// background, any command still running at its timeout. The execution is detached from
// the call (shell.Detacher) and adapted into job hooks; the call returns the job's
// first read — the output so far — and a marker naming the job. Reads are consuming and
// nothing was read before, so the job's next read starts exactly where the call's
// ended: no byte is lost or shown twice. When the jobs runtime refuses the job (the
// session's limit), the call goes on as if there were no jobs: a command waiting for
// input waits on, one at its timeout is killed as a timeout.

// foreground is one foreground call in progress.
type foreground struct {
	t       *bashTool
	session *container.Session
	tty     bool
	ceiling ceiling       // the session's role's sandbox ceiling
	start   time.Time     // when the command was started (for the audit log and traces)
	jobs    *jobs.Runtime // nil: no hand-over (no jobs plugin, or background disabled)
	x       shell.Execution
	spec    shell.ExecSpec
}

// Why a command is handed over.
const (
	handOverInput   = "input"
	handOverTimeout = "timeout"
)

// inputRecheck is how often a quiet tty command is looked at again while it does not
// wait for input (it sleeps, or waits for something else).
const inputRecheck = 250 * time.Millisecond

// run waits for the command to end, or hands it over.
func (f *foreground) run(ctx context.Context) (tools.Result, error) {
	timeout := f.timeoutTimer()
	check := f.inputTimer()
	defer timeout.Stop()
	defer check.Stop()
	for {
		select {
		case <-f.x.Done():
			return f.finished(ctx, false)
		case <-timeout.C:
			if res, ok := f.handOver(handOverTimeout); ok {
				return res, nil
			}
			return f.finished(ctx, f.x.Kill())
		case <-check.C:
			if f.waitingForInput() {
				if res, ok := f.handOver(handOverInput); ok {
					return res, nil
				}
			}
			check.Reset(f.untilQuiet())
		}
	}
}

// finished renders the command's end. timedOut: the call killed it at its timeout (a
// hand-over spec has no deadline of its own to say so).
func (f *foreground) finished(ctx context.Context, timedOut bool) (tools.Result, error) {
	// The call's ctx aborts the execution (Execute); the wait itself must not stop at
	// the abort, so the result reports it and no process outlives the call.
	res, err := f.x.Result(context.WithoutCancel(ctx))
	if err != nil {
		return tools.Result{}, err
	}
	if timedOut && !res.Aborted && (res.Signal != "" || res.ExitCode == nil) {
		res.TimedOut = true
	}
	return f.t.result(res, f.tty, f.ceiling, f.start), nil
}

// timeoutTimer fires at a hand-over spec's timeout; never otherwise.
func (f *foreground) timeoutTimer() *time.Timer {
	if f.spec.Expiry != shell.ExpiryHandOver {
		return idleTimer()
	}
	return time.NewTimer(time.Duration(f.spec.TimeoutMs) * time.Millisecond)
}

// inputTimer fires when a tty command that could be handed over has been quiet for
// inputWaitMs; never otherwise.
func (f *foreground) inputTimer() *time.Timer {
	if !f.tty || f.jobs == nil {
		return idleTimer()
	}
	if _, ok := f.x.(shell.Input); !ok {
		return idleTimer() // a failed start
	}
	return time.NewTimer(f.t.inputWait)
}

func idleTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// untilQuiet is how long until the output will have been quiet for inputWaitMs, or,
// when it is quiet already, until the next look.
func (f *foreground) untilQuiet() time.Duration {
	a, ok := f.x.(shell.Activity)
	if !ok {
		return inputRecheck
	}
	if d := time.Until(a.LastOutput().Add(f.t.inputWait)); d > 0 {
		return d
	}
	return inputRecheck
}

// waitingForInput reports whether the command's output has been quiet for inputWaitMs
// while it waits for input: its foreground process blocked reading the terminal, or,
// where the executor cannot tell, output that does not end in a newline.
func (f *foreground) waitingForInput() bool {
	a, ok := f.x.(shell.Activity)
	in, isInput := f.x.(shell.Input)
	if !ok || !isInput || time.Since(a.LastOutput()) < f.t.inputWait {
		return false
	}
	if waiting, known := in.WaitingForInput(); known {
		return waiting
	}
	if a.OutputBytes() == 0 {
		return false // nothing to answer yet
	}
	text := plainText(a.Tail(lastLineBytes))
	return text != "" && !strings.HasSuffix(text, "\n")
}

// handOver makes the command a job of the session: the output so far, then the marker.
// It reports false when the jobs runtime refused the job or the command ended first.
func (f *foreground) handOver(why string) (tools.Result, bool) {
	var first string
	snap, err := f.jobs.Start(jobs.Spec{
		Kind:  "bash",
		Label: f.spec.Command,
		Owner: f.session,
		Run: func() (jobs.Hooks, error) {
			d, ok := f.x.(shell.Detacher)
			if !ok || !d.Detach() {
				return jobs.Hooks{}, errEnded
			}
			h := f.t.adapt(f.x, f.tty, f.ceiling)
			first = h.ReadOutput() // before anyone else can read: the output so far
			return h, nil
		},
	})
	if err != nil {
		return tools.Result{}, false
	}
	if first == "" {
		first = noOutput
	}
	marker := waitingMarker(snap.ID)
	if why == handOverTimeout {
		marker = stillRunningMarker(f.spec.TimeoutMs, snap.ID)
	}
	return tools.Result{
		Text:  withNewline(first) + marker,
		Value: BackgroundValue{Kind: KindBackground, JobID: snap.ID, HandOver: why},
	}, true
}

// errEnded: the command finished, or is being killed, before it could be handed over.
var errEnded = errors.New("the command ended before it could be handed over")

// waitingMarker ends the result of a command handed over while it waits for input.
func waitingMarker(id string) string {
	return fmt.Sprintf("[waiting for input: continuing as background job %s; answer with job_write, read with job_output]", id)
}

// stillRunningMarker ends the result of a command handed over at its timeout.
func stillRunningMarker(timeoutMs int64, id string) string {
	return fmt.Sprintf("[still running after %dms: continuing as background job %s; read it with job_output, stop it with job_kill]", timeoutMs, id)
}
