package container

import (
	"slices"
	"time"
)

// Changes is what a composition changed, by row id in profile order: the rows it
// mounted (new ids), restarted (kept ids whose fiber was replaced — another plugin or
// config — or whose activation ended because a service it injects went or changed; the
// row's state says whether it is active again) and disposed (removed or disabled).
// Every list is non-nil.
type Changes struct {
	Mounted   []string `json:"mounted"`
	Restarted []string `json:"restarted"`
	Disposed  []string `json:"disposed"`
}

// mountedFiber is a mounted fiber and its activation at one moment (nil: none).
type mountedFiber struct {
	fiber *fiber
	act   *Activation
}

// mountedNow is every mounted fiber with its activation, in profile order.
func (r *Runtime) mountedNow() []mountedFiber {
	r.mu.RLock()
	defer r.mu.RUnlock()
	m := make([]mountedFiber, len(r.order))
	for i, f := range r.order {
		m[i] = mountedFiber{f, f.act}
	}
	return m
}

// changes compares the composition now with before, of which gone were disposed
// (removed, or replaced under their id).
func (r *Runtime) changes(before []mountedFiber, gone []*fiber) Changes {
	c := Changes{Mounted: []string{}, Restarted: []string{}, Disposed: []string{}}
	was := make(map[string]mountedFiber, len(before))
	for _, m := range before {
		was[m.fiber.row.ID] = m
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, f := range r.order {
		prev, kept := was[f.row.ID]
		switch {
		case !kept:
			c.Mounted = append(c.Mounted, f.row.ID)
		case slices.Contains(gone, prev.fiber) || (prev.act != nil && f.act != prev.act):
			c.Restarted = append(c.Restarted, f.row.ID)
		}
	}
	for _, m := range before {
		if _, still := r.byID[m.fiber.row.ID]; !still {
			c.Disposed = append(c.Disposed, m.fiber.row.ID)
		}
	}
	return c
}

// Reload is the outcome of one reload of the profile (Status.LastReload).
type Reload struct {
	// At is when it was applied or refused.
	At time.Time `json:"at"`
	// Result is ReloadApplied, ReloadFailed or ReloadUndone.
	Result string `json:"result"`
	// Error is why it failed ("" otherwise); the last good composition keeps running.
	Error string `json:"error"`
	// Changes are the rows it mounted, restarted and disposed (empty unless applied).
	Changes
}

// Reload results.
const (
	// ReloadApplied: the edited profile is running.
	ReloadApplied = "applied"
	// ReloadFailed: the edit was refused; the last good composition keeps running.
	ReloadFailed = "failed"
	// ReloadUndone: the file is back to what runs (a failed edit was undone).
	ReloadUndone = "undone"
)

// RecordReload records the outcome of a reload, shown as Status.LastReload (and its
// error as Status.LastReloadError), and tells subscribers. A profile.Reloader calls it;
// so may an embedder that reloads by other means.
func (r *Runtime) RecordReload(rl Reload) {
	rl.Mounted = nonNil(rl.Mounted)
	rl.Restarted = nonNil(rl.Restarted)
	rl.Disposed = nonNil(rl.Disposed)
	r.mu.Lock()
	r.lastReload = &rl
	r.reloadErr = rl.Error
	r.mu.Unlock()
	r.notify()
}

func nonNil(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return slices.Clone(ids)
}
