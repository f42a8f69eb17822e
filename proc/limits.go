package proc

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ResourceLimits bound what one process tree may use, and what all the trees of its
// owner (the harness session) may use together. A zero field is no limit.
type ResourceLimits struct {
	// Memory is the most memory, in bytes, the tree may use.
	Memory int64
	// Processes is the most processes (and threads) the tree may have at once.
	Processes int64
	// CPUs is the tree's CPU quota, in CPUs (1.5: one and a half CPUs' worth of time).
	CPUs float64
	// SessionMemory, SessionProcesses and SessionCPUs are the same limits for all the
	// trees of the owner together.
	SessionMemory    int64
	SessionProcesses int64
	SessionCPUs      float64
}

// IsZero reports whether l sets no limit.
func (l ResourceLimits) IsZero() bool { return l == ResourceLimits{} }

// Session is l with the per-tree limits removed: what a process that belongs to the
// session but is none of its commands (a sandbox's box) runs under.
func (l ResourceLimits) Session() ResourceLimits {
	return ResourceLimits{SessionMemory: l.SessionMemory, SessionProcesses: l.SessionProcesses, SessionCPUs: l.SessionCPUs}
}

// Limit names one limit, as results report it (the typed value's "limit").
type Limit string

const (
	LimitMemory           Limit = "memory"
	LimitProcesses        Limit = "processes"
	LimitSessionMemory    Limit = "sessionMemory"
	LimitSessionProcesses Limit = "sessionProcesses"
)

// LimitHit is a limit a process tree reached: the memory controller killed one of its
// processes, or the pids controller refused one of its forks.
type LimitHit struct {
	Limit Limit
	// Size is the limit's value: bytes for a memory limit, a count for a process limit.
	Size int64
}

// Words are what the hit says to a reader, as the bash tool's marker has them:
// "killed: memory limit of 64 MiB reached", "process limit of 50 reached: new processes
// were refused", "killed: session memory limit of 2 GiB reached"…
func (h LimitHit) Words() string {
	switch h.Limit {
	case LimitMemory:
		return "killed: memory limit of " + FormatBytes(h.Size) + " reached"
	case LimitSessionMemory:
		return "killed: session memory limit of " + FormatBytes(h.Size) + " reached"
	case LimitProcesses:
		return "process limit of " + strconv.FormatInt(h.Size, 10) + " reached: new processes were refused"
	case LimitSessionProcesses:
		return "session process limit of " + strconv.FormatInt(h.Size, 10) + " reached: new processes were refused"
	}
	return string(h.Limit) + " limit reached"
}

// Killed reports whether the hit killed a process (a memory limit), rather than refused
// one (a process limit).
func (h LimitHit) Killed() bool { return h.Limit == LimitMemory || h.Limit == LimitSessionMemory }

// Budget is what a process tree used of its host's resources, and which limits it
// reached, as the service that ran it accounted them.
type Budget struct {
	// CPUMs is the CPU time the tree used, in milliseconds; -1 when not accounted.
	CPUMs int64
	// PeakMemoryBytes is the most memory the tree used at once; -1 when not accounted.
	PeakMemoryBytes int64
	// Hits are the limits the tree reached: at most one memory limit (first) and one
	// process limit.
	Hits []LimitHit
}

// Clone is a copy of b that shares nothing with it (nil for nil).
func (b *Budget) Clone() *Budget {
	if b == nil {
		return nil
	}
	c := *b
	c.Hits = append([]LimitHit(nil), b.Hits...)
	return &c
}

// Binary units, as FormatBytes writes them and ParseBytes reads them.
var byteUnits = []struct {
	name string
	size int64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}

// FormatBytes writes n bytes in the largest binary unit it reaches, with at most two
// decimals: "512 MiB", "2 GiB", "1.5 GiB", "100 B".
func FormatBytes(n int64) string {
	for _, u := range byteUnits {
		if n >= u.size {
			v := strconv.FormatFloat(math.Round(float64(n)/float64(u.size)*100)/100, 'f', -1, 64)
			return v + " " + u.name
		}
	}
	return strconv.FormatInt(n, 10) + " B"
}

// ParseBytes reads a size in bytes as a configuration gives it: a positive whole number
// of bytes, or a string of a positive number and a binary unit ("512MiB", "1.5 GiB",
// "64KiB"; a string without a unit is bytes). The result is rounded down to a whole
// byte and must be at least one.
func ParseBytes(v any) (int64, error) {
	var n float64
	switch x := v.(type) {
	case int:
		n = float64(x)
	case int64:
		n = float64(x)
	case uint64:
		n = float64(x)
	case float64:
		n = x
	case string:
		f, err := parseSizeString(x)
		if err != nil {
			return 0, err
		}
		n = f
	default:
		return 0, fmt.Errorf("expected a number of bytes or a size such as \"512MiB\", got %v", v)
	}
	if math.IsNaN(n) || math.IsInf(n, 0) || n < 1 || n >= 1<<62 {
		return 0, fmt.Errorf("expected a positive size below 4 EiB, got %v", v)
	}
	return int64(n), nil
}

func parseSizeString(s string) (float64, error) {
	text := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if rest, ok := strings.CutSuffix(text, u.name); ok {
			text, mult = strings.TrimSpace(rest), u.size
			break
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || text == "" || strings.ContainsAny(text, "xXpPeEinIN_") {
		return 0, fmt.Errorf("expected a number of bytes or a size such as \"512MiB\" (units KiB, MiB, GiB, TiB), got %q", s)
	}
	return f * float64(mult), nil
}
