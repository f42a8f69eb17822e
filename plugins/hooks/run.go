package hooks

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/dsh-dev/dsh/container"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/proc"
)

// Bounds of one run.
const (
	// maxStdout is the most a hook may print on stdout: its answer. Beyond it the hook
	// has failed (a cut answer cannot be read).
	maxStdout = 1 << 20
	// maxStderr is how much of stderr (a deny's reason) is kept: its tail.
	maxStderr = 64 << 10
	// graceMs is how long a hook's tree gets between SIGTERM and SIGKILL, and its pipes
	// to drain once it exited.
	graceMs = 1000
)

// keyTranscript is the managed variable naming the session's audit file (the
// session-log plugin's): a hook's transcript_path.
const keyTranscript = "DSH_SESSION_JSONL"

// payload is the JSON object a hook reads on stdin.
type payload struct {
	SessionID      string         `json:"session_id"`
	TranscriptPath string         `json:"transcript_path"`
	Cwd            string         `json:"cwd"`
	HookEventName  string         `json:"hook_event_name"`
	ToolName       string         `json:"tool_name"`
	ToolInput      map[string]any `json:"tool_input"`
	ToolResponse   *toolResponse  `json:"tool_response,omitempty"`
}

// toolResponse is a PostToolUse hook's view of the result.
type toolResponse struct {
	Text              string `json:"text"`
	IsError           bool   `json:"isError"`
	StructuredContent any    `json:"structuredContent"`
}

// run is how one hook run ended: its exit code and output, or why it failed.
type run struct {
	code           int
	stdout, stderr string
	// failure says why the run failed ("hook failed: exit code 1"); "" when it exited
	// 0 or 2 with an output that fits.
	failure string
}

// runner runs hooks: through the Supervisor, with the managed environment.
type runner struct {
	sup *subprocess.Supervisor
	env *shellenv.Registry
}

// run runs h for one call of tool with input (and, for PostToolUse, its result).
func (r *runner) run(ctx context.Context, h *hook, session *container.Session, tool string, input map[string]any, res *tools.Result) run {
	snap, err := r.env.Collect(ctx, shellenv.Call{Session: session})
	if err != nil {
		return failed(err.Error())
	}
	ws := workspace(session)
	p := payload{Cwd: ws, HookEventName: h.event, ToolName: tool, ToolInput: input}
	p.TranscriptPath, _ = snap.Get(keyTranscript)
	if session != nil {
		p.SessionID = session.ID
	}
	if res != nil {
		p.ToolResponse = &toolResponse{Text: res.Text, IsError: res.IsError, StructuredContent: res.Value}
	}
	stdin, err := json.Marshal(p)
	if err != nil {
		return failed("its input cannot be encoded: " + err.Error())
	}
	spec := subprocess.Spec{
		Argv:     []string{"bash", "-c", h.command},
		Dir:      ws,
		Env:      map[string]string{"CLAUDE_PROJECT_DIR": ws},
		DshEnv:   snap.Map(),
		Stdin:    stdin,
		Stdout:   proc.Capture{MaxBytes: maxStdout},
		Stderr:   proc.Capture{MaxBytes: maxStderr},
		GraceMs:  graceMs,
		Deadline: time.Now().Add(time.Duration(h.timeoutMs) * time.Millisecond),
	}
	if session != nil {
		spec.Owner = session.ID
	}
	hp, err := r.sup.Spawn(ctx, spec)
	if err != nil {
		return failed(err.Error())
	}
	hp.EndTree() // nothing the hook started outlives it
	return ended(hp, h.timeoutMs)
}

// ended reads how a settled hook process ended.
func ended(p *subprocess.Process, timeoutMs int64) run {
	ex, _ := p.Exit()
	out := p.Stdout().Output()
	r := run{stdout: out.Text, stderr: strings.TrimSpace(p.Stderr().Output().Text), code: -1}
	switch {
	case ex.Reason == proc.ReasonTimeout:
		r.failure = fmt.Sprintf("hook failed: timed out after %dms", timeoutMs)
	case ex.Reason == proc.ReasonAbort:
		r.failure = "hook failed: the call was aborted"
	case ex.Reason != proc.ReasonNone:
		r.failure = "hook failed: killed"
	case ex.Err != nil:
		r.failure = "hook failed: " + ex.Err.Error()
	case ex.Code == nil:
		r.failure = "hook failed: killed by signal " + ex.Signal
	default:
		r.code = *ex.Code
		if r.code != 0 && r.code != 2 {
			r.failure = fmt.Sprintf("hook failed: exit code %d", r.code)
		} else if out.Truncated {
			r.failure = fmt.Sprintf("hook failed: its output exceeds %d bytes", maxStdout)
		}
	}
	return r
}

func failed(why string) run {
	return run{code: -1, failure: "hook failed: " + why}
}

// workspace is where a session's hooks run: its workspace, else the harness's working
// directory.
func workspace(session *container.Session) string {
	if session != nil && session.Cwd != "" {
		return session.Cwd
	}
	wd, err := os.Getwd()
	if err != nil {
		return "/"
	}
	return wd
}
