package tools

import (
	"fmt"

	"github.com/dsh-dev/dsh/internal/suggest"
)

// ExplainUnavailable sets how the registry tells a tool that is unavailable — declared
// by a row of the composition that is not active — from one that does not exist: why
// returns the reason ("row tool-bash is pending (…)") and true for the former. The tools
// plugin sets the runtime's (container.Activation.ToolUnavailable).
func (r *Registry) ExplainUnavailable(why func(tool string) (string, bool)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unavailable = why
}

// Missing is the error message for a call to name, a tool the registry does not hold,
// and whether the tool is unavailable rather than unknown:
//
//	tool "bash" is unavailable: row tool-bash is pending (missing shell ← row bash failed: …)
//	unknown tool "bsh" (did you mean "bash"?)
//
// The suggestion is the registered tool whose name is closest, when one is that close.
func (r *Registry) Missing(name string) (msg string, unavailable bool) {
	r.mu.RLock()
	why := r.unavailable
	r.mu.RUnlock()
	if why != nil {
		if reason, ok := why(name); ok {
			return fmt.Sprintf("tool %q is unavailable: %s", name, reason), true
		}
	}
	return fmt.Sprintf("unknown tool %q", name) + suggest.DidYouMean(name, r.names()), false
}

// names are the registered tools' names, sorted.
func (r *Registry) names() []string {
	ts := r.Tools()
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return names
}
