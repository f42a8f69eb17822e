package toolbash

import (
	"strconv"
	"strings"

	"github.com/dsh-dev/dsh/plugins/jobs"
	"github.com/dsh-dev/dsh/plugins/shell"
)

// The rendering contract (SPEC §5.4, §5.5, §8). Every function here is pure.

// NoOutput is the body of a result with neither stdout nor stderr.
const NoOutput = "(no output)"

// EscalationHint follows a denial marker when a wider sandbox mode can be requested.
const EscalationHint = "[sandbox: escalation available — retry this exact command once with sandbox_permissions " +
	"(the narrowest wider mode that suffices) + justification; the approval prompt asks the user]"

// DeniedMarker is the line that reports a sandbox denial under mode.
func DeniedMarker(mode string) string {
	return "[sandbox: file access denied under " + mode + " mode]"
}

// RunnerFailedMarker is the line that reports that the sandbox launcher itself failed.
func RunnerFailedMarker(mode string) string {
	return "[sandbox: the sandbox runner itself failed under " + mode +
		" mode — the command did not run; this is a sandbox problem, not a command failure]"
}

// TimedOutMarker is the line that reports a timeout kill.
func TimedOutMarker(timeoutMs int64) string {
	return "[timed out after " + itoa(timeoutMs) + "ms]"
}

// TruncatedMarker follows a stream whose head was dropped; path "" means no complete
// spill file exists.
func TruncatedMarker(path string) string {
	if path == "" {
		path = "(unavailable)"
	}
	return "[output truncated; full output: " + path + "]"
}

// LossyMarker follows a background read that lost output from memory.
func LossyMarker(paths ...string) string {
	var kept []string
	for _, p := range paths {
		if p != "" {
			kept = append(kept, p)
		}
	}
	list := strings.Join(kept, ", ")
	if list == "" {
		list = "(unavailable)"
	}
	return "[some output was dropped from memory; full output: " + list + "]"
}

// RenderStream renders one captured stream: its text, plus the truncation marker after
// a newline when bytes were dropped.
func RenderStream(s shell.StreamResult) string {
	if !s.Truncated {
		return s.Text
	}
	return s.Text + "\n" + TruncatedMarker(s.SpillPath)
}

// Render is the model-facing text of a foreground run. escalation says whether the
// escalation hint follows a denial (the tool advertises sandbox_permissions and a wider
// mode exists).
func Render(res shell.RunResult, escalation bool) string {
	var b strings.Builder
	b.WriteString(RenderStream(res.Stdout))
	if stderr := RenderStream(res.Stderr); stderr != "" {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString("[stderr]\n")
		b.WriteString(stderr)
	}
	if b.Len() == 0 {
		b.WriteString(NoOutput)
	}
	markers := Markers(res, escalation)
	if len(markers) > 0 {
		if !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString(strings.Join(markers, "\n"))
	}
	return b.String()
}

// Markers returns the status lines of a foreground run, in order: sandbox (runner
// failure, or denial plus the escalation hint), timeout, then signal or nonzero exit.
func Markers(res shell.RunResult, escalation bool) []string {
	markers := sandboxMarkers(res.Sandbox, escalation)
	if res.TimedOut {
		markers = append(markers, TimedOutMarker(res.TimeoutMs))
	}
	if res.Signal != "" {
		markers = append(markers, shell.SignalMarker(res.Signal))
	} else if res.ExitCode != nil && *res.ExitCode != 0 {
		markers = append(markers, shell.ExitCodeMarker(*res.ExitCode))
	}
	return markers
}

func sandboxMarkers(facts *shell.SandboxFacts, escalation bool) []string {
	switch {
	case facts == nil:
		return nil
	case facts.RunnerFailed:
		return []string{RunnerFailedMarker(facts.Mode)}
	case facts.Denied:
		if escalation {
			return []string{DeniedMarker(facts.Mode), EscalationHint}
		}
		return []string{DeniedMarker(facts.Mode)}
	}
	return nil
}

// RenderRead renders one consuming background read: the new output, and the lossy
// notice (after a newline) when part of it was dropped from memory.
func RenderRead(r shell.ProcessRead) string {
	if !r.Lossy {
		return r.Delta
	}
	text := r.Delta
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return text + LossyMarker(r.StdoutSpillPath, r.StderrSpillPath)
}

// OutcomeOf maps how a background command ended to its job outcome: a signal death is
// killed ("signal: SIGTERM"), any other kill is killed ("killed before exit"), the rest
// completed ("exit code: N" — a nonzero exit is reported, not failed).
func OutcomeOf(st shell.ExitStatus) jobs.Outcome {
	switch {
	case st.Signal != "":
		return jobs.Outcome{Status: jobs.StatusKilled, Detail: "signal: " + st.Signal}
	case st.Status == shell.StatusKilled:
		return jobs.Outcome{Status: jobs.StatusKilled, Detail: "killed before exit"}
	case st.ExitCode == nil:
		return jobs.Outcome{Status: jobs.StatusFailed, Detail: "exit status unknown"}
	}
	return jobs.Outcome{Status: jobs.StatusCompleted, Detail: "exit code: " + itoa(int64(*st.ExitCode))}
}

// ForegroundValue is the typed result of a foreground call (MCP structured content).
type ForegroundValue struct {
	Kind      string        `json:"kind"` // "foreground"
	ExitCode  *int          `json:"exitCode"`
	Signal    *string       `json:"signal"`
	TimedOut  bool          `json:"timedOut"`
	Aborted   bool          `json:"aborted"`
	TimeoutMs int64         `json:"timeoutMs"`
	Stdout    StreamValue   `json:"stdout"`
	Stderr    StreamValue   `json:"stderr"`
	Sandbox   *SandboxValue `json:"sandbox,omitempty"`
}

// StreamValue is one captured stream in a ForegroundValue.
type StreamValue struct {
	Text      string `json:"text"`
	Truncated bool   `json:"truncated"`
	SpillPath string `json:"spillPath,omitempty"`
}

// SandboxValue reports how a confined command ran.
type SandboxValue struct {
	Mode         string `json:"mode"`
	Denied       bool   `json:"denied"`
	Enforcement  string `json:"enforcement"`
	RunnerFailed bool   `json:"runnerFailed"`
}

// BackgroundValue is the typed result of a background start.
type BackgroundValue struct {
	Kind  string `json:"kind"` // "background"
	JobID string `json:"jobId"`
}

// ValueOf converts a run result to its typed value: exitCode is null after a signal,
// signal null without one.
func ValueOf(res shell.RunResult) ForegroundValue {
	v := ForegroundValue{
		Kind:      "foreground",
		TimedOut:  res.TimedOut,
		Aborted:   res.Aborted,
		TimeoutMs: res.TimeoutMs,
		Stdout:    StreamValue{Text: res.Stdout.Text, Truncated: res.Stdout.Truncated, SpillPath: res.Stdout.SpillPath},
		Stderr:    StreamValue{Text: res.Stderr.Text, Truncated: res.Stderr.Truncated, SpillPath: res.Stderr.SpillPath},
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
	return v
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
