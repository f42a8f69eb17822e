package toolbash

import "github.com/dsh-dev/dsh/shell"

// The typed results of the bash tool (tools.Result.Value): what programs decode from
// MCP structured content or `dsh call --json`. The JSON names are a contract.

// Values of the "kind" field, which tells a decoder which value it holds.
const (
	// KindForeground marks a ForegroundValue: the command ran to its end.
	KindForeground = "foreground"
	// KindBackground marks a BackgroundValue: the command was started as a job.
	KindBackground = "background"
)

// ForegroundValue is the typed result of a foreground call.
type ForegroundValue struct {
	// Kind is KindForeground.
	Kind string `json:"kind"`
	// ExitCode is the command's exit code; nil (JSON null) when a signal ended it.
	ExitCode *int `json:"exitCode"`
	// Signal is the signal that ended the command ("SIGTERM"…); nil (JSON null) when
	// it exited by itself.
	Signal *string `json:"signal"`
	// TimedOut is true when the command was killed because its timeout passed.
	TimedOut bool `json:"timedOut"`
	// Aborted is true when the command was killed because the call was cancelled.
	// At most one of TimedOut and Aborted is set.
	Aborted bool `json:"aborted"`
	// TimeoutMs is the effective timeout the executor applied, in milliseconds.
	TimeoutMs int64 `json:"timeoutMs"`
	// Stdout and Stderr are the captured output streams.
	Stdout StreamValue `json:"stdout"`
	Stderr StreamValue `json:"stderr"`
	// Sandbox reports how a confining executor ran the command; nil (omitted) when the
	// executor does not confine.
	Sandbox *SandboxValue `json:"sandbox,omitempty"`
	// Usage is what the command used, when it ran under resource limits and the host
	// accounts it; nil (omitted) otherwise.
	Usage *UsageValue `json:"usage,omitempty"`
	// Limit names the resource limit the command reached ("memory", "processes",
	// "sessionMemory", "sessionProcesses"); "" (omitted) when none.
	Limit string `json:"limit,omitempty"`

	// run is what observers learn beyond the JSON (CommandRun).
	run runFacts
}

// StreamValue is one captured output stream of a ForegroundValue.
type StreamValue struct {
	// Text is the captured text: the whole stream, or its tail when Truncated.
	Text string `json:"text"`
	// Truncated is true when bytes were dropped from memory; the head of the stream is
	// then missing from Text.
	Truncated bool `json:"truncated"`
	// SpillPath names a file holding the complete stream; "" (omitted) when none exists.
	SpillPath string `json:"spillPath,omitempty"`
}

// SandboxValue reports how a confined command ran.
type SandboxValue struct {
	// Mode is the sandbox mode the command ran under ("read-only", "workspace-write"
	// or "danger-full-access").
	Mode string `json:"mode"`
	// Denied is true when the command failed because the sandbox refused an operation.
	Denied bool `json:"denied"`
	// Enforcement says how completely the host enforced the mode: "full" or "partial"
	// for the confined modes, "" for danger-full-access.
	Enforcement string `json:"enforcement"`
	// RunnerFailed is true when the sandbox launcher itself failed and the command did
	// not run (a sandbox problem, never a denial).
	RunnerFailed bool `json:"runnerFailed"`
}

// BackgroundValue is the typed result of a call that started a background job.
type BackgroundValue struct {
	// Kind is KindBackground.
	Kind string `json:"kind"`
	// JobID is the job's id ("bash-1"), for job_output, job_kill and job_list.
	JobID string `json:"jobId"`
	// HandOver says why a foreground call became this job: "input" (it waits for
	// input: answer it with job_write) or "timeout" (it outlived its timeout); ""
	// (omitted) for a run_in_background start.
	HandOver string `json:"handOver,omitempty"`
}

// valueOf converts a run result to its typed value: exitCode is null after a signal,
// signal null without one.
func valueOf(res shell.RunResult) ForegroundValue {
	v := ForegroundValue{
		Kind:      KindForeground,
		TimedOut:  res.TimedOut,
		Aborted:   res.Aborted,
		TimeoutMs: res.TimeoutMs,
		Stdout:    streamValue(res.Stdout),
		Stderr:    streamValue(res.Stderr),
		run:       runFacts{stdoutBytes: res.Stdout.Bytes, stderrBytes: res.Stderr.Bytes},
	}
	if res.Signal != "" {
		sig := res.Signal
		v.Signal = &sig
	} else if res.ExitCode != nil {
		code := *res.ExitCode
		v.ExitCode = &code
	}
	if f := res.Sandbox; f != nil {
		v.Sandbox = &SandboxValue{Mode: f.Mode, Denied: f.Denied, Enforcement: f.Enforcement, RunnerFailed: f.RunnerFailed}
	}
	budgetValue(&v, res.Budget)
	return v
}

func streamValue(s shell.StreamResult) StreamValue {
	return StreamValue{Text: s.Text, Truncated: s.Truncated, SpillPath: s.SpillPath}
}
