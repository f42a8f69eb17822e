package container

import (
	"sort"
	"time"
)

// Status is a snapshot of a runtime. Its JSON encoding is exactly what `dsh status
// --json` prints and the MCP resource dsh://status serves: every field is always
// present (empty lists and maps rather than null), and `since` is RFC 3339.
type Status struct {
	Profile         string      `json:"profile"`
	Rows            []RowStatus `json:"rows"`
	LastReloadError string      `json:"lastReloadError"`
	// LastReload is the last reload's outcome: when, its result, the rows it changed;
	// null before the first.
	LastReload *Reload `json:"lastReload"`
}

// RowStatus is one mounted row.
type RowStatus struct {
	ID     string `json:"id"`
	Plugin string `json:"plugin"`
	State  State  `json:"state"`
	// Missing lists the injected services that do not exist (pending rows).
	Missing []string `json:"missing"`
	// Error is the failure kept by a failed row, or a hung-apply report.
	Error string `json:"error"`
	// Candidates maps each missing service to the catalog plugins that could provide it.
	Candidates map[string][]string `json:"candidates"`
	// Providers maps each injected service that exists to the row providing it.
	Providers map[string]string `json:"providers"`
	// Detail is a note the plugin set about itself (process isolation, sandbox
	// enforcement, connection state).
	Detail string `json:"detail"`
	// Since is when the row entered its state.
	Since time.Time `json:"since"`
}

// Status returns a snapshot of every mounted row, in profile order.
func (r *Runtime) Status() Status {
	r.mu.RLock()
	defer r.mu.RUnlock()
	st := Status{Profile: r.profile, LastReloadError: r.reloadErr, Rows: make([]RowStatus, 0, len(r.order))}
	if r.lastReload != nil {
		rl := *r.lastReload
		st.LastReload = &rl
	}
	for _, f := range r.order {
		rs := RowStatus{ID: f.row.ID, Plugin: f.plugin.Name, State: f.state, Missing: []string{}, Detail: f.detail, Since: f.since,
			Candidates: map[string][]string{}, Providers: map[string]string{}}
		if f.err != nil {
			rs.Error = f.err.Error()
		}
		for _, s := range f.plugin.inject {
			if p, ok := r.services[s]; ok {
				rs.Providers[s] = p.fiber.row.ID
				continue
			}
			rs.Missing = append(rs.Missing, s)
			cands := r.catalog.Providers(s)
			if cands == nil {
				cands = []string{}
			}
			rs.Candidates[s] = cands
		}
		sort.Strings(rs.Missing)
		st.Rows = append(st.Rows, rs)
	}
	return st
}

// SetLastReloadError records the outcome of the last reload attempt, shown as
// Status.LastReloadError (nil after a good one), and tells subscribers when it changed.
// A profile.Reloader calls it; so may an embedder that reloads by other means.
func (r *Runtime) SetLastReloadError(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	r.mu.Lock()
	changed := r.reloadErr != msg
	r.reloadErr = msg
	r.mu.Unlock()
	if changed {
		r.notify()
	}
}
