package container

import (
	"sort"
	"time"
)

// Status is a snapshot of a runtime: what `dsh status --json` prints and the MCP resource
// dsh://status serves.
type Status struct {
	Profile         string      `json:"profile"`
	Rows            []RowStatus `json:"rows"`
	LastReloadError string      `json:"lastReloadError"`
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
	Candidates map[string][]string `json:"candidates,omitempty"`
	// Providers maps each injected service that exists to the row providing it.
	Providers map[string]string `json:"providers,omitempty"`
	// Detail is a note the plugin set about itself.
	Detail string    `json:"detail,omitempty"`
	Since  time.Time `json:"since"`
}

// Status returns a snapshot of every mounted row, in profile order.
func (r *Runtime) Status() Status {
	r.mu.RLock()
	defer r.mu.RUnlock()
	st := Status{Profile: r.profile, LastReloadError: r.reloadErr, Rows: make([]RowStatus, 0, len(r.order))}
	for _, f := range r.order {
		rs := RowStatus{ID: f.row.ID, Plugin: f.plugin.Name, State: f.state, Missing: []string{}, Detail: f.detail, Since: f.since}
		if f.err != nil {
			rs.Error = f.err.Error()
		}
		for _, s := range f.plugin.Inject {
			if p, ok := r.services[s]; ok {
				if rs.Providers == nil {
					rs.Providers = map[string]string{}
				}
				rs.Providers[s] = p.fiber.row.ID
				continue
			}
			rs.Missing = append(rs.Missing, s)
			if rs.Candidates == nil {
				rs.Candidates = map[string][]string{}
			}
			rs.Candidates[s] = r.catalog.Providers(s)
		}
		sort.Strings(rs.Missing)
		st.Rows = append(st.Rows, rs)
	}
	return st
}

// setReloadError records the outcome of the last reload ("" after a good one) and
// tells subscribers when it changed.
func (r *Runtime) setReloadError(msg string) {
	r.mu.Lock()
	changed := r.reloadErr != msg
	r.reloadErr = msg
	r.mu.Unlock()
	if changed {
		r.notify()
	}
}
