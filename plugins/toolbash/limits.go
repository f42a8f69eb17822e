package toolbash

import (
	"strconv"
	"strings"

	"github.com/dsh-dev/dsh/plugins/jobs"
	"github.com/dsh-dev/dsh/proc"
	"github.com/dsh-dev/dsh/shell"
)

// What the bash tool says of resource limits (docs/limits.md): the markers of a limit a
// command reached, the typed value's usage and limit, a job's outcome, and the
// description's line naming the limits. Every function here is pure.

// limitMarkers are the lines of the limits a run reached, in the order they were
// accounted (a memory kill, then a refused fork): they follow the sandbox marker and
// precede the timeout marker.
func limitMarkers(b *proc.Budget) []string {
	if b == nil {
		return nil
	}
	lines := make([]string, 0, len(b.Hits))
	for _, h := range b.Hits {
		lines = append(lines, "["+h.Words()+"]")
	}
	return lines
}

// UsageValue is what a command used, as the host accounted it (a field it did not
// account is omitted).
type UsageValue struct {
	// CPUMs is the CPU time the command's processes used, in milliseconds.
	CPUMs *int64 `json:"cpuMs,omitempty"`
	// PeakMemoryBytes is the most memory they used at once.
	PeakMemoryBytes *int64 `json:"peakMemoryBytes,omitempty"`
}

// budgetValue sets v's usage and limit from a run's budget.
func budgetValue(v *ForegroundValue, b *proc.Budget) {
	if b == nil {
		return
	}
	u := UsageValue{}
	if b.CPUMs >= 0 {
		ms := b.CPUMs
		u.CPUMs = &ms
	}
	if b.PeakMemoryBytes >= 0 {
		peak := b.PeakMemoryBytes
		u.PeakMemoryBytes = &peak
	}
	if u.CPUMs != nil || u.PeakMemoryBytes != nil {
		v.Usage = &u
	}
	if len(b.Hits) > 0 {
		v.Limit = string(b.Hits[0].Limit)
	}
}

// limitOutcome is out as a job's outcome says it when its command reached limits: a
// memory kill makes it killed, with the marker's words as its detail; a refused fork
// adds its words to the detail.
func limitOutcome(out jobs.Outcome, b *proc.Budget) jobs.Outcome {
	if b == nil {
		return out
	}
	for _, h := range b.Hits {
		switch {
		case h.Killed():
			out = jobs.Outcome{Status: jobs.StatusKilled, Detail: h.Words()}
		case out.Detail == "":
			out.Detail = h.Words()
		default:
			out.Detail += "; " + h.Words()
		}
	}
	return out
}

// limitsDescription is the description's line naming the limits commands run under,
// so that the model plans for them; "" when there are none (the description is then
// the same as without this line).
func limitsDescription(r proc.ResourceLimits) string {
	if r.IsZero() {
		return ""
	}
	var each, session []string
	if r.Memory > 0 {
		each = append(each, proc.FormatBytes(r.Memory)+" of memory")
	}
	if r.Processes > 0 {
		each = append(each, strconv.FormatInt(r.Processes, 10)+" processes")
	}
	if r.CPUs > 0 {
		each = append(each, cpusText(r.CPUs))
	}
	if r.SessionMemory > 0 {
		session = append(session, proc.FormatBytes(r.SessionMemory)+" of memory")
	}
	if r.SessionProcesses > 0 {
		session = append(session, strconv.FormatInt(r.SessionProcesses, 10)+" processes")
	}
	if r.SessionCPUs > 0 {
		session = append(session, cpusText(r.SessionCPUs))
	}
	var parts []string
	if len(each) > 0 {
		parts = append(parts, "each command may use at most "+strings.Join(each, ", "))
	}
	if len(session) > 0 {
		parts = append(parts, "all commands and background jobs of this session together at most "+strings.Join(session, ", "))
	}
	return "\n- Resource limits: " + strings.Join(parts, "; ") + ". " +
		"A command the memory limit stopped ends with [killed: memory limit of <size> reached], one whose new processes were refused shows [process limit of <N> reached: new processes were refused] (session limits say session memory limit / session process limit): " +
		"a limit, not a bug — use less (smaller inputs, fewer parallel processes, stop background jobs you no longer need) instead of retrying the same command."
}

// cpusText is a CPU quota as the description says it: "1.5 CPUs", "1 CPU".
func cpusText(cpus float64) string {
	unit := " CPUs"
	if cpus == 1 {
		unit = " CPU"
	}
	return strconv.FormatFloat(cpus, 'f', -1, 64) + unit
}

// executorLimits are the resource limits of the executor's commands (none for one that
// does not say).
func executorLimits(ex shell.Executor) proc.ResourceLimits {
	if l, ok := ex.(shell.Limited); ok {
		return l.ResourceLimits()
	}
	return proc.ResourceLimits{}
}
