package toolbash

import (
	"strconv"
	"strings"

	"github.com/dsh-dev/dsh/plugins/jobs"
	"github.com/dsh-dev/dsh/proc"
	"github.com/dsh-dev/dsh/shell"
)

// The rendering contract (see the package documentation). Every function here is pure.

// noOutput is the body of a result with neither stdout nor stderr.
const noOutput = "(no output)"

// escalationHint follows a denial marker when a wider sandbox mode can be requested.
const escalationHint = "[sandbox: escalation available — retry this exact command once with sandbox_permissions " +
	"(the narrowest wider mode that suffices) + justification; the approval prompt asks the user]"

// deniedMarker is the line that reports a sandbox denial under mode.
func deniedMarker(mode string) string {
	return "[sandbox: file access denied under " + mode + " mode]"
}

// runnerFailedMarker is the line that reports that the sandbox launcher itself failed.
func runnerFailedMarker(mode string) string {
	return "[sandbox: the sandbox runner itself failed under " + mode +
		" mode — the command did not run; this is a sandbox problem, not a command failure]"
}

// timedOutMarker is the line that reports a timeout kill.
func timedOutMarker(timeoutMs int64) string {
	return "[timed out after " + itoa(timeoutMs) + "ms]"
}

// truncatedMarker follows a stream whose head was dropped; path "" means no complete
// spill file exists.
func truncatedMarker(path string) string {
	if path == "" {
		path = "(unavailable)"
	}
	return "[output truncated; full output: " + path + "]"
}

// lossyMarker follows a background read that lost output from memory.
func lossyMarker(paths ...string) string {
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

// renderStream renders one captured stream: its text, plus the truncation marker after
// a newline when bytes were dropped.
func renderStream(s shell.StreamResult) string {
	if !s.Truncated {
		return s.Text
	}
	return s.Text + "\n" + truncatedMarker(s.SpillPath)
}

// render is the model-facing text of a foreground run. escalation says whether the
// escalation hint follows a denial (the tool advertises sandbox_permissions and a wider
// mode exists).
func render(res shell.RunResult, escalation bool) string {
	var b strings.Builder
	b.WriteString(renderStream(res.Stdout))
	if stderr := renderStream(res.Stderr); stderr != "" {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString("[stderr]\n")
		b.WriteString(stderr)
	}
	if b.Len() == 0 {
		b.WriteString(noOutput)
	}
	markers := statusMarkers(res, escalation)
	if len(markers) > 0 {
		if !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString(strings.Join(markers, "\n"))
	}
	return b.String()
}

// statusMarkers returns the status lines of a foreground run, in order: sandbox (runner
// failure, or denial plus the escalation hint), the limits it reached, timeout, then
// signal or nonzero exit.
func statusMarkers(res shell.RunResult, escalation bool) []string {
	markers := sandboxMarkers(res.Sandbox, escalation)
	markers = append(markers, limitMarkers(res.Budget)...)
	if res.TimedOut {
		markers = append(markers, timedOutMarker(res.TimeoutMs))
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
		return []string{runnerFailedMarker(facts.Mode)}
	case facts.Denied:
		if escalation {
			return []string{deniedMarker(facts.Mode), escalationHint}
		}
		return []string{deniedMarker(facts.Mode)}
	}
	return nil
}

// renderRead renders one consuming background read: the new output, and the lossy
// notice (after a newline) when part of it was dropped from memory.
func renderRead(r shell.ProcessRead) string {
	if !r.Lossy {
		return r.Delta
	}
	return withNewline(r.Delta) + lossyMarker(r.StdoutSpillPath, r.StderrSpillPath)
}

// withNewline ends a non-empty text with a newline, so that a marker line can follow.
func withNewline(text string) string {
	if text != "" && !strings.HasSuffix(text, "\n") {
		return text + "\n"
	}
	return text
}

// outcomeOf maps how a background command ended (Execution.Exit, once Done) to its
// job outcome: a signal death is killed ("signal: SIGTERM"), any other kill is killed
// ("killed before exit"), the rest completed ("exit code: N" — a nonzero exit is
// reported, not failed); the limits it reached then have their say (limitOutcome).
func outcomeOf(ex proc.Exit, ok bool) jobs.Outcome {
	return limitOutcome(exitOutcome(ex, ok), ex.Budget)
}

func exitOutcome(ex proc.Exit, _ bool) jobs.Outcome {
	switch {
	case ex.Signal != "":
		return jobs.Outcome{Status: jobs.StatusKilled, Detail: "signal: " + ex.Signal}
	case ex.State() == proc.Killed:
		return jobs.Outcome{Status: jobs.StatusKilled, Detail: "killed before exit"}
	case ex.Code == nil:
		return jobs.Outcome{Status: jobs.StatusFailed, Detail: "exit status unknown"}
	}
	return jobs.Outcome{Status: jobs.StatusCompleted, Detail: "exit code: " + itoa(int64(*ex.Code))}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
