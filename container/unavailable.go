package container

import (
	"slices"
	"strings"
)

// ToolUnavailable reports why tool, which the plugin of a mounted row declares
// (Plugin.Tools), is not there: that row is not active. why follows what the row waits
// for down to the cause, e.g.
//
//	row tool-bash is pending (missing shell ← row bash failed: <its error>)
//
// ok is false when no mounted row declares tool, or one that does is active.
func (r *Runtime) ToolUnavailable(tool string) (why string, ok bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, f := range r.order {
		if !slices.Contains(f.plugin.Tools, tool) {
			continue
		}
		if f.state == StateActive {
			return "", false
		}
		return r.whyLocked(f, map[*fiber]bool{}), true
	}
	return "", false
}

// ToolUnavailable is the runtime's ToolUnavailable, for a registry of tools to explain
// a call for one it does not hold.
func (a *Activation) ToolUnavailable(tool string) (why string, ok bool) {
	return a.rt.ToolUnavailable(tool)
}

// whyLocked says why f is not active: its state, and for a pending row each missing
// service with the row that would provide it (recursively; seen breaks cycles).
func (r *Runtime) whyLocked(f *fiber, seen map[*fiber]bool) string {
	seen[f] = true
	row := "row " + f.row.ID
	switch f.state {
	case StateFailed:
		if f.err != nil {
			return row + " failed: " + f.err.Error()
		}
		return row + " failed"
	case StatePending:
	default:
		return row + " is " + string(f.state)
	}
	var missing []string
	for _, s := range f.plugin.inject {
		if _, ok := r.services[s]; ok {
			continue
		}
		var causes []string
		for _, p := range r.providers[s] {
			if !seen[p] {
				causes = append(causes, r.whyLocked(p, seen))
			}
		}
		switch {
		case len(causes) > 0:
			missing = append(missing, "missing "+s+" ← "+strings.Join(causes, " or "))
		case len(r.providers[s]) == 0:
			missing = append(missing, "missing "+s+", which no row provides")
		default:
			missing = append(missing, "missing "+s)
		}
	}
	if len(missing) == 0 {
		return row + " is pending"
	}
	return row + " is pending (" + strings.Join(missing, "; ") + ")"
}
