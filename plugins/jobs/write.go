package jobs

import (
	"context"
	"math"
	"time"

	"github.com/dsh-dev/dsh/plugins/tools"
)

// Bounds of job_write's wait_ms.
const (
	defaultWriteWaitMs = 500
	maxWriteWaitMs     = 30000
)

// jobWriteTool is job_write {job_id, input, close, wait_ms}: it writes input to a tty
// job's terminal (ending the input after it with close), then returns once the output
// has been quiet for 200 ms, wait_ms passed (default 500, at most 30000) or the job
// finished — the new output and the status line, as job_output renders them. A job
// that takes no input, or has finished, is an error (see Runtime.Write).
func jobWriteTool(rt *Runtime, jobID, jobIDAlias *tools.Schema) tools.Tool {
	return tools.Tool{
		Name: "job_write",
		Description: "Type input into a background job started with tty: true (its terminal), then read what it answers. " +
			"End a line with \\n; \\u0003 is Ctrl-C (interrupts the running program), \\u0004 is Ctrl-D (end of input at the start of a line, which ends most REPLs). " +
			"The terminal echoes what is typed. Returns once the job's output has been quiet for 200 ms, wait_ms passed, or the job finished: " +
			"the new output and the status line, as job_output returns them. Send an empty input to just wait and read.",
		InputSchema: &tools.Schema{Type: "object", Properties: tools.Properties{
			{Name: "job_id", Schema: jobID},
			{Name: "jobId", Schema: jobIDAlias},
			{Name: "input", Schema: &tools.Schema{Type: "string", Description: "What to type (may be empty): text, \\n to end a line, control characters such as \\u0003 (Ctrl-C)."}},
			{Name: "close", Schema: &tools.Schema{Type: "boolean", Description: "End the job's input after writing (Ctrl-D at the start of a line). Default false."}},
			{Name: "wait_ms", Schema: &tools.Schema{Type: "number", Description: "The longest to wait for the job's answer, in milliseconds (default 500, at most 30000)."}},
		}, Required: []string{"job_id", "input"}},
		OutputSchema: outputValueSchema,
		Execute: func(ctx context.Context, call tools.Call) (tools.Result, error) {
			return jobWrite(ctx, rt, call), nil
		},
	}
}

func jobWrite(ctx context.Context, rt *Runtime, call tools.Call) tools.Result {
	id, bad := parseJobID(call)
	if bad != nil {
		return *bad
	}
	input, _ := call.Args["input"].(string)
	end, _ := call.Args["close"].(bool)
	wait, bad := writeWait(call)
	if bad != nil {
		return *bad
	}
	out, err := rt.Write(ctx, call.Session, id, input, end, wait)
	if err != nil {
		return tools.Errorf("%v", err)
	}
	return outputResult(out)
}

// writeWait is job_write's wait: wait_ms (default 500) clamped to 30000; a wait_ms that
// is not a non-negative finite number is an error result.
func writeWait(call tools.Call) (time.Duration, *tools.Result) {
	ms := float64(defaultWriteWaitMs)
	if v, given := call.Args["wait_ms"]; given {
		f, _ := tools.Number(v)
		if !(f >= 0) || math.IsInf(f, 0) {
			res := tools.Errorf("invalid wait_ms: expected a non-negative number, got %s", jsonText(v))
			return 0, &res
		}
		ms = f
	}
	ms = math.Min(ms, maxWriteWaitMs)
	return time.Duration(ms * float64(time.Millisecond)), nil
}
