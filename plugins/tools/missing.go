package tools

import (
	"fmt"

	"github.com/dsh-dev/dsh/internal/suggest"
)

// Missing is the error message for a call to name, a tool the registry does not hold:
// `unknown tool "bsh"`, followed by ` (did you mean "bash"?)` when a registered tool's
// name is that close.
func (r *Registry) Missing(name string) string {
	return fmt.Sprintf("unknown tool %q", name) + suggest.DidYouMean(name, r.names())
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
