package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/prompt"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// Service is the key the runtime is provided under.
var Service = container.NewKey[*Runtime]("jobs")

// promptText is the tool:jobs prompt section (order 106).
const promptText = "Background jobs: keep track of the job ids you start. You are notified when a job finishes, " +
	"so do not busy-poll job_output or sleep while you wait; do other work or end your turn. " +
	"Collect a finished job's output with job_output, and stop jobs that no longer matter with job_kill."

// Plugin declares the jobs runtime and its tools.
var Plugin = container.Define(container.Declaration[*Config]{
	Name:    "jobs",
	Aliases: []string{"@deepseek-ai/dsh-jobs"},
	Inject:  container.Keys{tools.Service, prompt.Service},
	Provide: container.Keys{Service},
	Tools:   []string{"job_output", "job_write", "job_list", "job_kill"},
	Config:  DefaultConfig,
	Apply:   apply,
})

// Module registers Plugin in the catalog.
var Module = container.ModuleOf(Plugin)

// Config is the jobs row's config.
type Config struct {
	// MaxConcurrentJobsPerOwner bounds the live jobs of one session.
	MaxConcurrentJobsPerOwner int `yaml:"maxConcurrentJobsPerOwner"`
	// MaxJobsTotal bounds the live jobs of all sessions together.
	MaxJobsTotal int `yaml:"maxJobsTotal"`
	// MaxFinishedJobsPerOwner bounds the finished jobs one session's records keep.
	MaxFinishedJobsPerOwner int `yaml:"maxFinishedJobsPerOwner"`
	// WaitTimeoutMs is how long job_output {wait: true} blocks when timeout_ms is absent.
	WaitTimeoutMs int `yaml:"waitTimeoutMs"`
	// MaxWaitTimeoutMs caps timeout_ms (larger requests are clamped).
	MaxWaitTimeoutMs int `yaml:"maxWaitTimeoutMs"`
}

// DefaultConfig returns the config with its defaults applied.
func DefaultConfig() *Config {
	return &Config{MaxConcurrentJobsPerOwner: 10, MaxJobsTotal: 256, MaxFinishedJobsPerOwner: 100, WaitTimeoutMs: 30000, MaxWaitTimeoutMs: 600000}
}

// Validate checks that every value is positive and the default wait is within the cap.
func (c *Config) Validate() error {
	for _, f := range []struct {
		key string
		v   int
	}{{"maxConcurrentJobsPerOwner", c.MaxConcurrentJobsPerOwner}, {"maxJobsTotal", c.MaxJobsTotal}, {"maxFinishedJobsPerOwner", c.MaxFinishedJobsPerOwner}, {"waitTimeoutMs", c.WaitTimeoutMs}, {"maxWaitTimeoutMs", c.MaxWaitTimeoutMs}} {
		if f.v <= 0 {
			return fmt.Errorf("%s must be a positive integer", f.key)
		}
	}
	if c.WaitTimeoutMs > c.MaxWaitTimeoutMs {
		return errors.New("waitTimeoutMs must be no greater than maxWaitTimeoutMs")
	}
	return nil
}

func apply(a *container.Activation, cfg *Config) error {
	reg, err := container.Injected(a, tools.Service)
	if err != nil {
		return err
	}
	prompts, err := container.Injected(a, prompt.Service)
	if err != nil {
		return err
	}
	rt := NewRuntime(Options{MaxConcurrentPerOwner: cfg.MaxConcurrentJobsPerOwner, MaxTotal: cfg.MaxJobsTotal, MaxFinishedPerOwner: cfg.MaxFinishedJobsPerOwner, Logger: a.Logger()})
	// Registered first so it runs last: the tools are gone before the jobs are disposed.
	a.Defer(rt.Close)
	if err := Service.Provide(a, rt); err != nil {
		return err
	}
	a.OnSessionEnd(rt.EndOwner)
	for _, t := range jobTools(rt, cfg) {
		if err := reg.Register(a, t); err != nil {
			return err
		}
	}
	return prompts.Add(a, prompt.Section{Name: "tool:jobs", Order: 106, Text: promptText})
}

// OutputValue is job_output's typed result (MCP structured content).
type OutputValue struct {
	// JobID, Kind and Label identify the job (see Snapshot).
	JobID string `json:"jobId"`
	Kind  string `json:"kind"`
	Label string `json:"label"`
	// Status and Detail are the job's state when the output was read.
	Status Status `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Output is the new output since the previous read ("" when none), as the text
	// has it.
	Output string `json:"output"`
	// Lossy is true when part of the new output was dropped from memory before this
	// read: Output then carries the "[some output was dropped from memory; full
	// output: …]" line, and StdoutSpill and StderrSpill are the files it names, which
	// hold the complete streams (omitted when there is none: the line says
	// "(unavailable)").
	Lossy       bool   `json:"lossy,omitempty"`
	StdoutSpill string `json:"stdoutSpill,omitempty"`
	StderrSpill string `json:"stderrSpill,omitempty"`
}

// ListValue is job_list's typed result (MCP structured content).
type ListValue struct {
	// Jobs are the caller's visible jobs, oldest first (never null).
	Jobs []Snapshot `json:"jobs"`
}

// KillValue is job_kill's typed result (MCP structured content).
type KillValue struct {
	// JobID is the job the request was for.
	JobID string `json:"jobId"`
	// Result says what the request did.
	Result KillResult `json:"result"`
	// Status and Detail are the job's state right after the request (stopping, or
	// the terminal status of a job that had already finished).
	Status Status `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// jobTools returns the job_output, job_write, job_list and job_kill tools over rt.
//
// job_output {job_id (or jobId), wait, timeout_ms}: a consuming read. Without wait it returns at
// once. With wait: true it first blocks until the job reaches a terminal status or
// timeout_ms passes (default cfg.WaitTimeoutMs, clamped to cfg.MaxWaitTimeoutMs), then
// returns the new output and the status at that moment — "[status: running]" after a
// timeout, which is not an error. A wait cut short by the call's cancellation consumes
// nothing. timeout_ms without wait is validated and otherwise ignored.
func jobTools(rt *Runtime, cfg *Config) []tools.Tool {
	if cfg == nil {
		cfg = DefaultConfig()
	}
	// Both spellings of the id: job_id (documented) and jobId (how bash's structured
	// result spells it, which models copy). job_id is required; jobId, its alias, stands in for it.
	jobID := &tools.Schema{Type: "string", Description: "Required: the id the job was started with, e.g. bash-1 (jobId is accepted as the same argument)."}
	jobIDAlias := &tools.Schema{Type: "string", Description: "Accepted spelling of job_id (as in bash's structured result); give one of the two.", AliasOf: "job_id"}
	return []tools.Tool{
		{
			Name: "job_output",
			Description: "Read a background job's new output and its status. Each read returns only the output produced since " +
				"the previous read (never the same output twice), or (no new output), then a status line such as " +
				"[status: running] or [status: completed, exit code: 0]. You are notified when a job finishes, so read it " +
				"then instead of polling. With wait: true the read first blocks until the job finishes or timeout_ms passes " +
				fmt.Sprintf("(default %d, at most %d), then returns the output so far and the status.", cfg.WaitTimeoutMs, cfg.MaxWaitTimeoutMs),
			InputSchema: &tools.Schema{Type: "object", Properties: tools.Properties{
				{Name: "job_id", Schema: jobID},
				{Name: "jobId", Schema: jobIDAlias},
				{Name: "wait", Schema: &tools.Schema{Type: "boolean", Description: "Block until the job finishes (or timeout_ms passes) before reading. Default false."}},
				{Name: "timeout_ms", Schema: &tools.Schema{Type: "number", Description: fmt.Sprintf("With wait: the longest to block, in milliseconds (default %d, capped at %d).", cfg.WaitTimeoutMs, cfg.MaxWaitTimeoutMs)}},
			}, Required: []string{"job_id"}},
			OutputSchema: outputValueSchema,
			Execute: func(ctx context.Context, call tools.Call) (tools.Result, error) {
				return jobOutput(ctx, rt, cfg, call), nil
			},
		},
		jobWriteTool(rt, jobID, jobIDAlias),
		{
			Name:         "job_list",
			Description:  "List your background jobs, one line each: <id> [<kind>] <status> — <label>.",
			InputSchema:  &tools.Schema{Type: "object"},
			OutputSchema: listValueSchema,
			Execute: func(_ context.Context, call tools.Call) (tools.Result, error) {
				return jobList(rt, call), nil
			},
		},
		{
			Name: "job_kill",
			Description: "Stop a background job whose result no longer matters. Its whole process tree is terminated; " +
				"its status is stopping until it ends (then killed). Remaining output stays readable with job_output.",
			InputSchema: &tools.Schema{Type: "object", Properties: tools.Properties{
				{Name: "job_id", Schema: jobID},
				{Name: "jobId", Schema: jobIDAlias},
				{Name: "reason", Schema: &tools.Schema{Type: "string", Description: "Why the job is no longer needed (for the log)."}},
			}, Required: []string{"job_id"}},
			OutputSchema: killValueSchema,
			Execute: func(_ context.Context, call tools.Call) (tools.Result, error) {
				return jobKill(rt, call), nil
			},
		},
	}
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// parseJobID returns the trimmed job id — job_id, or its other spelling jobId — or the
// validation error result. Without either the message is the registry's own for a
// missing required property.
func parseJobID(call tools.Call) (string, *tools.Result) {
	raw, given := call.Args["job_id"].(string)
	if alias, ok := call.Args["jobId"].(string); ok {
		if given && alias != raw {
			res := tools.Errorf(`"job_id" (%s) and "jobId" (%s) name different jobs: give one of them`, jsonText(raw), jsonText(alias))
			return "", &res
		}
		raw, given = alias, true
	}
	if !given {
		res := tools.Errorf(`missing required property "job_id"`)
		return "", &res
	}
	if id := strings.TrimSpace(raw); id != "" {
		return id, nil
	}
	res := tools.Errorf("invalid job_id: expected a non-empty string, got %s", jsonText(raw))
	return "", &res
}

// waitTimeout returns how long a job_output call blocks: 0 without wait, else
// timeout_ms (or the configured default) clamped to the cap. A timeout_ms that is not a
// positive finite number is an error result (checked even without wait).
func waitTimeout(cfg *Config, call tools.Call) (time.Duration, *tools.Result) {
	ms := float64(cfg.WaitTimeoutMs)
	if v, given := call.Args["timeout_ms"]; given {
		f, _ := tools.Number(v)
		if !(f > 0) || math.IsInf(f, 0) {
			res := tools.Errorf("invalid timeout_ms: expected a positive number, got %s", jsonText(v))
			return 0, &res
		}
		ms = f
	}
	if w, _ := call.Args["wait"].(bool); !w {
		return 0, nil
	}
	ms = math.Min(ms, float64(cfg.MaxWaitTimeoutMs))
	return time.Duration(ms * float64(time.Millisecond)), nil
}

func jobOutput(ctx context.Context, rt *Runtime, cfg *Config, call tools.Call) tools.Result {
	id, bad := parseJobID(call)
	if bad != nil {
		return *bad
	}
	wait, bad := waitTimeout(cfg, call)
	if bad != nil {
		return *bad
	}
	out, err := rt.Read(ctx, call.Session, id, wait)
	if err != nil {
		return tools.Errorf("%v", err)
	}
	return outputResult(out)
}

// outputResult renders a read as job_output does: the new output or "(no new output)",
// a newline if needed, the status line.
func outputResult(out Output) tools.Result {
	text := out.Text
	if text == "" {
		text = "(no new output)"
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	text += out.Job.statusLine()
	return tools.Result{Text: text, Value: OutputValue{JobID: out.Job.ID, Kind: out.Job.Kind, Label: out.Job.Label,
		Status: out.Job.Status, Detail: out.Job.Detail, Output: out.Text,
		Lossy: out.Loss.Lossy, StdoutSpill: out.Loss.StdoutSpill, StderrSpill: out.Loss.StderrSpill}}
}

// listText renders job_list's text.
func listText(jobs []Snapshot) string {
	if len(jobs) == 0 {
		return "(no background jobs)"
	}
	lines := make([]string, len(jobs))
	for i, j := range jobs {
		lines[i] = fmt.Sprintf("%s [%s] %s — %s", j.ID, j.Kind, j.Status, oneLine(j.Label))
	}
	return strings.Join(lines, "\n")
}

func jobList(rt *Runtime, call tools.Call) tools.Result {
	jobs := rt.List(call.Session)
	if jobs == nil {
		jobs = []Snapshot{}
	}
	for i := range jobs {
		jobs[i].Label = oneLine(jobs[i].Label) // the listing's line, in the value too
	}
	return tools.Result{Text: listText(jobs), Value: ListValue{Jobs: jobs}}
}

func jobKill(rt *Runtime, call tools.Call) tools.Result {
	id, bad := parseJobID(call)
	if bad != nil {
		return *bad
	}
	reason, _ := call.Args["reason"].(string)
	res, snap, err := rt.Kill(call.Session, id, reason)
	if err != nil {
		return tools.Errorf("%v", err)
	}
	value := KillValue{JobID: snap.ID, Result: res, Status: snap.Status, Detail: snap.Detail}
	if res == KillAlreadyFinished {
		return tools.Result{Text: fmt.Sprintf("job %s had already finished %s", snap.ID, snap.statusLine()), Value: value}
	}
	return tools.Result{Text: "requested cancellation of job " + snap.ID, Value: value}
}
