package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/jobs"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// awaitJobs waits for each background job the call started and prints, on stderr,
// what job_output reads of it once it has finished — the text the model would read.
// A job lives as long as its session, and the session of `dsh call` ends when it
// exits: without the wait the job would be killed the moment it started, its work
// undone and its output lost. stdout stays the call's result alone. A signal (Ctrl-C)
// ends the wait; the session's end then kills the job, which is said too, and the
// command fails.
func (g *globalFlags) awaitJobs(ctx context.Context, rt *container.Runtime, reg *tools.Registry, session *container.Session, keep func(*tools.Result)) error {
	runtime, ok := container.Lookup(rt, jobs.Service)
	if !ok {
		return nil
	}
	for _, job := range runtime.List(session) {
		fmt.Fprintf(g.stderr, "dsh: waiting for background job %s to finish: a job ends with its session, which is this call's (Ctrl-C kills it)\n", job.ID)
		res, finished := readToTheEnd(ctx, reg, session, job.ID)
		if !finished {
			fmt.Fprintf(g.stderr, "dsh: interrupted: background job %s is killed with the call's session\n", job.ID)
			return exitCodeError(exitError)
		}
		keep(&res)
		fmt.Fprintf(g.stderr, "dsh: background job %s finished; job_output reads:\n%s\n", job.ID, forTerminal(g.stderr, res.Text))
	}
	return nil
}

// readToTheEnd calls job_output with wait until the job has finished, and returns its
// text — the output read across the calls, then the final status line — and whether it
// finished (false when ctx ended first, or the tool failed).
func readToTheEnd(ctx context.Context, reg *tools.Registry, session *container.Session, id string) (tools.Result, bool) {
	args, _ := json.Marshal(map[string]any{"job_id": id, "wait": true, "timeout_ms": jobs.DefaultConfig().MaxWaitTimeoutMs})
	var output string
	for {
		res := reg.Call(ctx, "job_output", args, session)
		v, ok := res.Value.(jobs.OutputValue)
		if res.IsError || !ok {
			return res, false
		}
		output += v.Output
		if !v.Status.Terminal() {
			continue
		}
		// job_output's text: the output (or "(no new output)"), a newline, the status line.
		status := res.Text[strings.LastIndex(res.Text, "\n")+1:]
		if output == "" {
			output = "(no new output)"
		}
		if !strings.HasSuffix(output, "\n") {
			output += "\n"
		}
		return tools.Result{Text: output + status, Value: v}, true
	}
}
