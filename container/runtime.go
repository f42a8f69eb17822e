package container

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// State is a fiber's lifecycle state.
type State string

// Fiber states. A fiber is pending while an injected service is missing, loading while
// Apply runs, active afterwards; failed keeps its error until its config changes or the
// harness restarts; unloading while its activation ends; disposed once removed.
const (
	StatePending   State = "pending"
	StateLoading   State = "loading"
	StateActive    State = "active"
	StateFailed    State = "failed"
	StateUnloading State = "unloading"
	StateDisposed  State = "disposed"
)

// Options configure a Runtime. Zero values take the defaults noted.
type Options struct {
	// Logger receives runtime and plugin logs (default: slog.Default()).
	Logger *slog.Logger
	// ApplyWarnAfter is how long an Apply may run before it is reported as hung
	// (default 10s). The report is a log line and the row's status error.
	ApplyWarnAfter time.Duration
	// StopTimeout bounds the wait for an activation's goroutines when it ends
	// (default 10s).
	StopTimeout time.Duration
}

// Row is one mounted profile row.
type Row struct {
	// ID is unique within a profile; reload diffs by it.
	ID string
	// Plugin is the plugin's catalog name or alias.
	Plugin string
	// Config is decoded onto the plugin's config value.
	Config map[string]any
	// Disabled rows are not mounted.
	Disabled bool
	// Source names the file the row came from, for errors.
	Source string
}

// RowError is an error about one profile row: it names the file, the row and what was wrong.
type RowError struct {
	Source string
	Row    string
	Err    error
}

func (e *RowError) Error() string {
	if e.Source == "" {
		return fmt.Sprintf("row %q: %v", e.Row, e.Err)
	}
	return fmt.Sprintf("%s: row %q: %v", e.Source, e.Row, e.Err)
}

func (e *RowError) Unwrap() error { return e.Err }

type fiber struct {
	row    Row
	plugin *Plugin
	state  State
	err    error
	since  time.Time
	seq    uint64 // activation order; 0 when not active
	act    *Activation
	detail string
	// config is the decoded config of the last activation; replaced is the config this
	// row ran before a reload replaced it (same id, another plugin or config), for the
	// first activation of the new fiber to compare (ReplacedConfig).
	config   any
	replaced any
	// conflict is the fiber that already provided a service this one provides, when
	// that is why this one failed: it is retried once that fiber leaves the composition.
	conflict *fiber
}

type provision struct {
	fiber *fiber
	value any
}

// Runtime mounts rows as fibers and keeps their activations consistent with the services
// that exist. Operations (Compose, Mount, Unmount, EndSession, Close) are serialized and
// run plugin code; Lookup and Status never wait for plugin code. Plugin code must not
// call the operation methods.
//
// What it guarantees (Cordis semantics):
//
//   - A fiber is pending while any service it injects is missing; Status names the
//     missing services and the catalog plugins that could provide them, and
//     CheckActivation names rows that can never activate.
//   - When a provider appears, its dependents activate; when it goes away or is
//     replaced, they unload, dependents first, and return to pending — and come back
//     by themselves.
//   - A second provider of one service fails that fiber, leaving the first untouched,
//     until the first leaves the composition: then it is retried. A profile with two
//     enabled providers of an exclusive service (one a plugin declares in Exclusive, as
//     the executors do for `shell`) is refused before anything starts. A cycle in
//     inject/provide declarations is reported with its path.
//   - A failing Apply (error or panic) fails only its fiber, keeping the error; a hung
//     one is reported. Failed fibers leave that state only by a config change, a
//     restart, or (a second provider) the first provider's leaving.
//   - An activation's context is cancelled when it ends; its goroutines (Go) are awaited
//     before its disposers (Defer, and everything registered with it as owner) run.
//   - One lock, never held while plugin code runs, guards fiber state.
//   - Compose validates a whole profile first (unknown keys, unknown plugins, bad config
//     values, duplicate ids, exclusive services, cycles; every error names the file, the
//     row and the key) and changes nothing when it fails; otherwise it diffs by row id
//     and restarts only what changed. A Reloader does that on every edit of the profile
//     file (or a base it extends) and keeps the last good composition when an edit is
//     invalid.
type Runtime struct {
	catalog *Catalog
	opts    Options
	log     *slog.Logger

	op sync.Mutex // serializes operations; plugin code runs while it is held

	mu           sync.RWMutex // guards everything below; never held while plugin code runs
	order        []*fiber
	byID         map[string]*fiber
	services     map[string]provision
	consumers    map[string][]*fiber // mounted fibers that inject the service, in mount order
	providers    map[string][]*fiber // mounted fibers that declare they provide the service
	seq          uint64
	profile      string
	profileFiles []string
	reloadErr    string
	closed       bool

	subMu  sync.Mutex
	subs   map[int]func()
	nextID int
}

// Subscribe registers fn to run after every operation that may have changed the
// composition (Compose, Mount, Unmount, Close, a reload attempt). fn runs outside every
// runtime lock and may call Lookup or Status. The returned func unsubscribes.
func (r *Runtime) Subscribe(fn func()) (cancel func()) {
	r.subMu.Lock()
	defer r.subMu.Unlock()
	if r.subs == nil {
		r.subs = map[int]func(){}
	}
	id := r.nextID
	r.nextID++
	r.subs[id] = fn
	return func() {
		r.subMu.Lock()
		defer r.subMu.Unlock()
		delete(r.subs, id)
	}
}

func (r *Runtime) notify() {
	r.subMu.Lock()
	ids := make([]int, 0, len(r.subs))
	for id := range r.subs {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	fns := make([]func(), 0, len(ids))
	for _, id := range ids {
		fns = append(fns, r.subs[id])
	}
	r.subMu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// NewRuntime returns an empty runtime over catalog.
func NewRuntime(catalog *Catalog, opts Options) *Runtime {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ApplyWarnAfter <= 0 {
		opts.ApplyWarnAfter = 10 * time.Second
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = 10 * time.Second
	}
	return &Runtime{
		catalog:   catalog,
		opts:      opts,
		log:       opts.Logger,
		byID:      map[string]*fiber{},
		services:  map[string]provision{},
		consumers: map[string][]*fiber{},
		providers: map[string][]*fiber{},
	}
}

// Catalog returns the runtime's catalog.
func (r *Runtime) Catalog() *Catalog { return r.catalog }

func (r *Runtime) lookup(name string) (any, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.services[name]
	return p.value, ok
}

// Validate checks rows as a whole without changing anything: ids, plugin names, configs,
// exclusive services and inject/provide cycles. Disabled rows are only checked for ids.
// Every error names the row's file (Row.Source) and id.
func (r *Runtime) Validate(rows []Row) error {
	_, err := r.prepare(rows)
	return err
}

// CheckActivation reports the enabled rows of rows that can never activate: a row that
// injects a service no enabled row provides (or only rows that can never activate
// themselves) stays pending for as long as the composition runs. Each error names the
// file, the row, the service, and the catalog plugins that could provide it. Such a
// profile is valid — a later edit may add the provider — so Compose accepts it; `dsh
// check` refuses it, and serving logs it. Rows naming unknown plugins are skipped
// (Validate reports them).
func (r *Runtime) CheckActivation(rows []Row) error {
	var enabled, disabled []preparedRow
	for _, row := range rows {
		p, err := r.catalog.lookup(row.Plugin)
		if err != nil {
			continue
		}
		if row.Disabled {
			disabled = append(disabled, preparedRow{row: row, plugin: p})
		} else {
			enabled = append(enabled, preparedRow{row: row, plugin: p})
		}
	}
	// Fixed point: a row can activate when every service it injects is provided by a
	// row that can.
	provided := map[string]bool{}
	can := make([]bool, len(enabled))
	for changed := true; changed; {
		changed = false
		for i, pr := range enabled {
			if can[i] || !allProvided(pr.plugin.inject, provided) {
				continue
			}
			can[i], changed = true, true
			for _, s := range pr.plugin.provide {
				provided[s] = true
			}
		}
	}
	var errs []error
	for i, pr := range enabled {
		if can[i] {
			continue
		}
		for _, s := range pr.plugin.inject {
			if provided[s] {
				continue
			}
			var providers []string
			for _, other := range enabled {
				if other.plugin.provides(s) {
					providers = append(providers, fmt.Sprintf("%q", other.row.ID))
				}
			}
			why := fmt.Sprintf("it injects %q, which no enabled row provides", s)
			if len(providers) > 0 {
				why = fmt.Sprintf("it injects %q, whose provider (row %s) can never activate either", s, strings.Join(providers, ", row "))
			} else {
				for _, off := range disabled {
					if off.plugin.provides(s) {
						why += fmt.Sprintf(" (row %q, which would, is disabled in %s)", off.row.ID, off.row.Source)
						break
					}
				}
			}
			if cands := r.catalog.Providers(s); len(cands) > 0 {
				why += fmt.Sprintf(" (plugins that provide it: %s)", strings.Join(cands, ", "))
			} else {
				why += " (no plugin in this binary provides it)"
			}
			errs = append(errs, &RowError{Source: pr.row.Source, Row: pr.row.ID, Err: errors.New("can never activate: " + why)})
			break
		}
	}
	return errors.Join(errs...)
}

func allProvided(services []string, provided map[string]bool) bool {
	for _, s := range services {
		if !provided[s] {
			return false
		}
	}
	return true
}

type preparedRow struct {
	row    Row
	plugin *Plugin
}

func (r *Runtime) prepare(rows []Row) ([]preparedRow, error) {
	var errs []error
	seen := make(map[string]bool, len(rows))
	out := make([]preparedRow, 0, len(rows))
	// resolved also holds rows whose config is bad, so that one bad value does not hide
	// an exclusive-service conflict or a cycle.
	resolved := make([]preparedRow, 0, len(rows))
	for _, row := range rows {
		if row.ID == "" {
			errs = append(errs, &RowError{Source: row.Source, Row: row.Plugin, Err: errors.New("missing id")})
			continue
		}
		if seen[row.ID] {
			errs = append(errs, &RowError{Source: row.Source, Row: row.ID, Err: errors.New("duplicate id")})
			continue
		}
		seen[row.ID] = true
		if row.Disabled {
			continue
		}
		p, err := r.catalog.lookup(row.Plugin)
		if err != nil {
			errs = append(errs, &RowError{Source: row.Source, Row: row.ID, Err: err})
			continue
		}
		resolved = append(resolved, preparedRow{row: row, plugin: p})
		if _, err := decodeConfig(p, row.Config); err != nil {
			errs = append(errs, &RowError{Source: row.Source, Row: row.ID, Err: err})
			continue
		}
		out = append(out, preparedRow{row: row, plugin: p})
	}
	for _, s := range r.catalog.exclusive {
		var refs []string
		for _, pr := range resolved {
			if pr.plugin.provides(s) {
				refs = append(refs, rowRef(pr.row))
			}
		}
		if len(refs) > 1 {
			errs = append(errs, fmt.Errorf("service %q has more than one enabled provider: %s; disable all but one", s, strings.Join(refs, ", ")))
		}
	}
	if err := findCycle(resolved); err != nil {
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// rowRef names a row in an error: `row "bash" (profile.yaml)`.
func rowRef(row Row) string {
	if row.Source == "" {
		return fmt.Sprintf("row %q", row.ID)
	}
	return fmt.Sprintf("row %q (%s)", row.ID, row.Source)
}

// cycleStep is one edge of an inject/provide cycle: row injects service, which provider
// declares it provides.
type cycleStep struct {
	row      Row
	service  string
	provider Row
}

func cycleError(steps []cycleStep) error {
	parts := make([]string, len(steps))
	for i, st := range steps {
		parts[i] = fmt.Sprintf("%s injects %q provided by row %q", rowRef(st.row), st.service, st.provider.ID)
	}
	return fmt.Errorf("inject/provide cycle: %s", strings.Join(parts, " → "))
}

// findCycle reports an inject/provide cycle among rows with its path. It is an iterative
// depth-first search: O(rows + edges), no recursion however deep the inject chain.
func findCycle(rows []preparedRow) error {
	if steps := findCyclePath(rows); steps != nil {
		return cycleError(steps)
	}
	return nil
}

func findCyclePath(rows []preparedRow) []cycleStep {
	providers := map[string][]int{}
	for i, pr := range rows {
		for _, s := range pr.plugin.provide {
			providers[s] = append(providers[s], i)
		}
	}
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, len(rows))
	// frame is a row being visited: which inject (si) and which provider of it (pi) is next.
	type frame struct{ row, si, pi int }
	var stack []frame
	for root := range rows {
		if color[root] != white {
			continue
		}
		color[root] = grey
		stack = append(stack[:0], frame{row: root})
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			inject := rows[top.row].plugin.inject
			if top.si >= len(inject) {
				color[top.row] = black
				stack = stack[:len(stack)-1]
				continue
			}
			ps := providers[inject[top.si]]
			if top.pi >= len(ps) {
				top.si++
				top.pi = 0
				continue
			}
			j := ps[top.pi]
			top.pi++
			switch color[j] {
			case white:
				color[j] = grey
				stack = append(stack, frame{row: j})
			case grey:
				// The stack from j's frame to the top is the cycle.
				start := len(stack) - 1
				for stack[start].row != j {
					start--
				}
				var steps []cycleStep
				for k := start; k < len(stack); k++ {
					fr := stack[k]
					next := j
					if k+1 < len(stack) {
						next = stack[k+1].row
					}
					steps = append(steps, cycleStep{
						row:      rows[fr.row].row,
						service:  rows[fr.row].plugin.inject[fr.si],
						provider: rows[next].row,
					})
				}
				return steps
			}
		}
	}
	return nil
}

// Compose makes the mounted rows match rows: it validates them as a whole first (on
// error nothing changes), then diffs by id: removed or disabled rows are disposed (in
// reverse activation order), rows whose plugin or config changed are restarted, new rows
// are mounted; untouched rows keep running. Dependents follow through the normal
// cascade. name labels the composition in status. Cost is O(rows + edges) plus the
// plugins' own work.
func (r *Runtime) Compose(name string, rows []Row) error {
	return r.compose(name, rows, nil)
}

// ComposeProfile composes p (Compose with p's name and rows) and records p's files,
// which plugins read through ProfileFiles while they apply and afterwards.
func (r *Runtime) ComposeProfile(p *Profile) error {
	return r.compose(p.Name, p.Rows, p.Files)
}

// profileFilesNow are the files of the running composition's profile (its own file, then
// each base it extends, as read), or none for a built-in profile or rows composed
// without a profile. A confining executor keeps them out of its commands' reach.
func (r *Runtime) profileFilesNow() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]string(nil), r.profileFiles...)
}

func (r *Runtime) compose(name string, rows []Row, files []string) error {
	defer r.notify()
	r.op.Lock()
	defer r.op.Unlock()
	if r.isClosed() {
		return errors.New("container: runtime is closed")
	}
	prepared, err := r.prepare(rows)
	if err != nil {
		return err
	}
	next := make(map[string]preparedRow, len(prepared))
	for _, pr := range prepared {
		next[pr.row.ID] = pr
	}
	r.mu.RLock()
	var gone []*fiber
	for _, f := range r.order {
		pr, keep := next[f.row.ID]
		if !keep || pr.plugin != f.plugin || !sameConfig(pr.row.Config, f.row.Config) {
			gone = append(gone, f)
		}
	}
	r.mu.RUnlock()
	// Dispose in reverse activation order (never-activated fibers last), so a removed
	// provider's removed dependents end before it does.
	sort.SliceStable(gone, func(i, j int) bool { return gone[i].seq > gone[j].seq })
	for _, f := range gone {
		r.unload(f, StateDisposed)
	}
	r.mu.Lock()
	replaced := make(map[string]*fiber, len(gone))
	for _, f := range gone {
		r.setStateLocked(f, StateDisposed)
		delete(r.byID, f.row.ID)
		replaced[f.row.ID] = f
	}
	order := make([]*fiber, 0, len(prepared))
	for _, pr := range prepared {
		f, ok := r.byID[pr.row.ID]
		if ok {
			f.row = pr.row // same plugin and config; the source file may have changed
		} else {
			f = &fiber{row: pr.row, plugin: pr.plugin, state: StatePending, since: time.Now()}
			if old := replaced[f.row.ID]; old != nil && old.config != nil {
				f.replaced = old.config
			}
			r.byID[f.row.ID] = f
		}
		order = append(order, f)
	}
	r.order = order
	r.rebuildIndexesLocked()
	r.retryConflictsLocked()
	r.profile = name
	r.profileFiles = slices.Clone(files)
	r.mu.Unlock()
	r.reconcile(r.pendingFibers())
	return nil
}

// rebuildIndexesLocked recomputes consumers and providers from r.order: O(rows + edges).
func (r *Runtime) rebuildIndexesLocked() {
	r.consumers = make(map[string][]*fiber, len(r.consumers))
	r.providers = make(map[string][]*fiber, len(r.order))
	for _, f := range r.order {
		r.indexLocked(f)
	}
}

func (r *Runtime) indexLocked(f *fiber) {
	for _, s := range f.plugin.inject {
		r.consumers[s] = append(r.consumers[s], f)
	}
	for _, s := range f.plugin.provide {
		r.providers[s] = append(r.providers[s], f)
	}
}

// Mount adds one row and activates it if it can. Its error covers the row itself (id,
// plugin, config); a row that mounts but cannot activate shows that in Status. A row
// that would close an inject/provide cycle is mounted failed with the cycle's path.
func (r *Runtime) Mount(row Row) error {
	defer r.notify()
	r.op.Lock()
	defer r.op.Unlock()
	if r.isClosed() {
		return errors.New("container: runtime is closed")
	}
	r.mu.RLock()
	_, dup := r.byID[row.ID]
	r.mu.RUnlock()
	if dup {
		return &RowError{Source: row.Source, Row: row.ID, Err: errors.New("duplicate id")}
	}
	if row.Disabled {
		return nil
	}
	prepared, err := r.prepare([]Row{row})
	if err != nil {
		return err
	}
	r.mu.Lock()
	f := r.newFiberLocked(prepared[0])
	r.order = append(r.order, f)
	r.mu.Unlock()
	if err := r.cycleFrom(f); err != nil {
		r.fail(f, err)
		return nil
	}
	r.reconcile([]*fiber{f})
	return nil
}

// Unmount disposes the row id; its dependents unload and return to pending.
func (r *Runtime) Unmount(id string) error {
	defer r.notify()
	r.op.Lock()
	defer r.op.Unlock()
	if r.isClosed() {
		return errors.New("container: runtime is closed")
	}
	r.mu.RLock()
	f, ok := r.byID[id]
	r.mu.RUnlock()
	if !ok {
		return fmt.Errorf("container: no row %q", id)
	}
	r.remove(f)
	r.reconcile(r.pendingFibers())
	return nil
}

// EndSession runs every active plugin's session-end hooks for id (for example, jobs
// cancels, awaits and deletes the session's jobs) and returns when they have.
//
// The hooks run outside the operation lock (they may wait for processes to end), so a
// reload or another session's end is not held up by them.
func (r *Runtime) EndSession(id string) {
	r.mu.RLock()
	var hooks []func(string)
	for _, f := range r.order {
		if f.state == StateActive && f.act != nil {
			hooks = append(hooks, f.act.sessionHooks()...)
		}
	}
	r.mu.RUnlock()
	for _, h := range hooks {
		func() {
			defer func() {
				if p := recover(); p != nil {
					r.log.Error("session-end hook panicked", "session", id, "panic", fmt.Sprint(p))
				}
			}()
			h(id)
		}()
	}
}

// WaitIdle waits until no operation (Compose, Mount, Unmount, Close) is in progress, or
// ctx ends; it reports whether the runtime was idle. Callers that found a service or tool
// missing use it to tell a reload in progress from a real absence.
func (r *Runtime) WaitIdle(ctx context.Context) bool {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		if r.op.TryLock() {
			r.op.Unlock()
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// Close disposes every fiber, active ones in reverse activation order. The runtime
// cannot be used afterwards. Close is idempotent.
func (r *Runtime) Close() {
	r.op.Lock()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.op.Unlock()
		return
	}
	defer r.notify() // once, after the lock below is released
	defer r.op.Unlock()
	r.closed = true
	active := r.activeBySeqDesc()
	r.mu.Unlock()
	for _, f := range active {
		r.teardown(f, StateDisposed)
	}
	r.mu.Lock()
	for _, f := range r.order {
		r.setStateLocked(f, StateDisposed)
	}
	r.mu.Unlock()
}

func (r *Runtime) isClosed() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.closed
}

func (r *Runtime) newFiberLocked(pr preparedRow) *fiber {
	f := &fiber{row: pr.row, plugin: pr.plugin, state: StatePending, since: time.Now()}
	r.byID[f.row.ID] = f
	r.indexLocked(f)
	return f
}

// remove disposes f (dependents first) and forgets it. O(rows): for single removals;
// Compose removes in bulk and rebuilds the indexes instead.
func (r *Runtime) remove(f *fiber) {
	r.unload(f, StateDisposed)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setStateLocked(f, StateDisposed)
	delete(r.byID, f.row.ID)
	unindex(r.consumers, f.plugin.inject, f)
	unindex(r.providers, f.plugin.provide, f)
	r.order = without(r.order, f)
	r.retryConflictsLocked()
}

// unindex removes f from index's lists for services, dropping lists left empty.
func unindex(index map[string][]*fiber, services []string, f *fiber) {
	for _, s := range services {
		if index[s] = without(index[s], f); len(index[s]) == 0 {
			delete(index, s)
		}
	}
}

func without(fs []*fiber, f *fiber) []*fiber {
	for i, g := range fs {
		if g == f {
			return append(fs[:i:i], fs[i+1:]...)
		}
	}
	return fs
}

func (r *Runtime) pendingFibers() []*fiber {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*fiber
	for _, f := range r.order {
		if f.state == StatePending {
			out = append(out, f)
		}
	}
	return out
}

// reconcile activates every fiber in queue that is ready, then the consumers of what it
// provides, until nothing more can activate.
func (r *Runtime) reconcile(queue []*fiber) {
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		if !r.ready(f) {
			continue
		}
		queue = append(queue, r.activate(f)...)
	}
}

func (r *Runtime) ready(f *fiber) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if f.state != StatePending || r.byID[f.row.ID] != f {
		return false
	}
	for _, s := range f.plugin.inject {
		if _, ok := r.services[s]; !ok {
			return false
		}
	}
	return true
}

// cycleFrom reports an inject/provide cycle through the newly mounted f among the mounted
// rows that are neither failed nor disposed. It searches from f in both directions at
// once (towards providers and towards consumers), one edge at a time, and stops as soon
// as either side runs out: the cost is bounded by the smaller of the two neighbourhoods,
// so mounting a long inject chain row by row stays linear in either row order.
func (r *Runtime) cycleFrom(f *fiber) error {
	if steps := r.cyclePathFrom(f); steps != nil {
		return cycleError(steps)
	}
	return nil
}

func (r *Runtime) cyclePathFrom(f *fiber) []cycleStep {
	r.mu.RLock()
	defer r.mu.RUnlock()
	type edge struct {
		to      *fiber // the next fiber towards f's side of the search
		service string
	}
	eligible := func(g *fiber) bool { return g.state != StateFailed && g.state != StateDisposed }
	// fwd[x]: how f reaches x (x's predecessor injects service, provided by x).
	// bwd[x]: how x reaches f (x injects service, provided by bwd[x].to).
	fwd := map[*fiber]edge{f: {}}
	bwd := map[*fiber]edge{f: {}}
	fw := &walker{lists: r.providers, queue: []*fiber{f}, forward: true}
	bw := &walker{lists: r.consumers, queue: []*fiber{f}}
	var meet *fiber
	var closing edge // set when the forward search reaches f itself
	for meet == nil {
		from, to, s, ok := fw.next()
		if !ok {
			return nil
		}
		if eligible(to) {
			if to == f {
				meet, closing = from, edge{to: f, service: s}
				break
			}
			if _, seen := fwd[to]; !seen {
				fwd[to] = edge{to: from, service: s}
				if _, ok := bwd[to]; ok {
					meet = to
					break
				}
				fw.queue = append(fw.queue, to)
			}
		}
		from, to, s, ok = bw.next()
		if !ok {
			return nil
		}
		// Backward edge: to injects s, which from provides.
		if eligible(to) {
			if to == f {
				// f injects s from `from`, and from reaches f backwards: a cycle.
				meet = f
				closing = edge{}
				bwd[f] = edge{to: from, service: s}
				break
			}
			if _, seen := bwd[to]; !seen {
				bwd[to] = edge{to: from, service: s}
				if _, ok := fwd[to]; ok {
					meet = to
					break
				}
				bw.queue = append(bw.queue, to)
			}
		}
	}
	// Path f → … → meet from the forward parents, then meet → … → f from the backward ones.
	var head []cycleStep
	for x := meet; x != f; {
		e := fwd[x]
		head = append(head, cycleStep{row: e.to.row, service: e.service, provider: x.row})
		x = e.to
	}
	slices.Reverse(head)
	steps := head
	if closing.to != nil {
		steps = append(steps, cycleStep{row: meet.row, service: closing.service, provider: f.row})
		return steps
	}
	for x := meet; ; {
		e := bwd[x]
		steps = append(steps, cycleStep{row: x.row, service: e.service, provider: e.to.row})
		x = e.to
		if x == f {
			break
		}
	}
	return steps
}

// walker enumerates the edges of a breadth-first search one at a time. Forward, a
// fiber's edges go to the providers of what it injects; backward, to the consumers of
// what it provides.
type walker struct {
	lists   map[string][]*fiber
	forward bool
	queue   []*fiber
	node    *fiber
	si, pi  int
}

func (w *walker) next() (from, to *fiber, service string, ok bool) {
	for {
		if w.node == nil {
			if len(w.queue) == 0 {
				return nil, nil, "", false
			}
			w.node, w.queue = w.queue[0], w.queue[1:]
			w.si, w.pi = 0, 0
		}
		services := w.node.plugin.provide
		if w.forward {
			services = w.node.plugin.inject
		}
		for w.si < len(services) {
			list := w.lists[services[w.si]]
			if w.pi < len(list) {
				w.pi++
				return w.node, list[w.pi-1], services[w.si], true
			}
			w.si++
			w.pi = 0
		}
		w.node = nil
	}
}

func (r *Runtime) activate(f *fiber) (wake []*fiber) {
	r.mu.RLock()
	for _, s := range f.plugin.provide {
		if p, ok := r.services[s]; ok && p.fiber != f {
			r.mu.RUnlock()
			r.fail(f, fmt.Errorf("service %q is already provided by row %q (%s)", s, p.fiber.row.ID, p.fiber.plugin.Name))
			r.mu.Lock()
			f.conflict = p.fiber
			r.mu.Unlock()
			return nil
		}
	}
	r.mu.RUnlock()

	config, err := decodeConfig(f.plugin, f.row.Config)
	if err != nil {
		r.fail(f, err)
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	act := &Activation{rt: r, fiber: f, id: f.row.ID, ctx: ctx, cancel: cancel, replaced: f.replaced}
	r.mu.Lock()
	f.act = act
	f.config = config
	f.replaced = nil // only the first activation after the reload replaced a row
	f.detail = ""
	r.setStateLocked(f, StateLoading)
	r.mu.Unlock()

	err = r.apply(f, act, config)
	provided := act.applied()
	if err == nil {
		for _, s := range f.plugin.provide {
			if _, ok := provided[s]; !ok {
				err = fmt.Errorf("%s: apply returned without providing declared service %q", f.plugin.Name, s)
				break
			}
		}
	}
	if err != nil {
		act.end()
		r.fail(f, err)
		return nil
	}
	r.mu.Lock()
	for s, v := range provided {
		r.services[s] = provision{fiber: f, value: v}
	}
	r.seq++
	f.seq = r.seq
	f.err = nil
	r.setStateLocked(f, StateActive)
	for _, s := range f.plugin.provide {
		wake = append(wake, r.consumers[s]...)
	}
	r.mu.Unlock()
	if r.log.Enabled(context.Background(), slog.LevelDebug) {
		act.Logger().Debug("activated")
	}
	return wake
}

// apply runs the plugin's Apply with a panic guard and a hung-apply watchdog.
func (r *Runtime) apply(f *fiber, act *Activation, config any) (err error) {
	warn := time.AfterFunc(r.opts.ApplyWarnAfter, func() {
		note := fmt.Errorf("apply has not returned after %s", r.opts.ApplyWarnAfter)
		act.Logger().Error("apply is hung", "after", r.opts.ApplyWarnAfter)
		r.mu.Lock()
		if f.act == act && f.state == StateLoading {
			f.err = note
		}
		r.mu.Unlock()
	})
	defer warn.Stop()
	defer func() {
		if p := recover(); p != nil {
			act.Logger().Error("apply panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = fmt.Errorf("%s: apply panicked: %v", f.plugin.Name, p)
		}
	}()
	return f.plugin.apply(act, config)
}

func (r *Runtime) fail(f *fiber, err error) {
	r.log.Error("plugin failed", "row", f.row.ID, "plugin", f.plugin.Name, "err", err)
	r.mu.Lock()
	defer r.mu.Unlock()
	f.err = err
	f.act = nil
	f.seq = 0
	f.conflict = nil
	r.setStateLocked(f, StateFailed)
}

// retryConflictsLocked returns to pending the fibers that failed because a service they
// provide was already provided by a fiber that is now disposed: the conflict is gone, so
// they may activate (and their failure no longer names a row that is not there).
func (r *Runtime) retryConflictsLocked() {
	for _, f := range r.order {
		if f.state == StateFailed && f.conflict != nil && f.conflict.state == StateDisposed {
			f.err, f.conflict = nil, nil
			r.setStateLocked(f, StatePending)
		}
	}
}

// unload ends f's activation (its active dependents first, in reverse activation order;
// they return to pending) and leaves f in state final. A fiber that is not active just
// moves to final when final is disposed.
func (r *Runtime) unload(f *fiber, final State) {
	r.mu.RLock()
	deps := r.dependentsLocked(f)
	r.mu.RUnlock()
	for _, d := range deps {
		r.teardown(d, StatePending)
	}
	r.teardown(f, final)
}

// dependentsLocked returns the active fibers that transitively inject something f
// provides, most recently activated first.
func (r *Runtime) dependentsLocked(f *fiber) []*fiber {
	seen := map[*fiber]bool{f: true}
	var out []*fiber
	stack := []*fiber{f}
	for len(stack) > 0 {
		g := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, s := range g.plugin.provide {
			if p, ok := r.services[s]; !ok || p.fiber != g {
				continue
			}
			for _, c := range r.consumers[s] {
				if !seen[c] && c.state == StateActive {
					seen[c] = true
					out = append(out, c)
					stack = append(stack, c)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq > out[j].seq })
	return out
}

func (r *Runtime) activeBySeqDesc() []*fiber {
	var out []*fiber
	for _, f := range r.order {
		if f.state == StateActive {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq > out[j].seq })
	return out
}

func (r *Runtime) teardown(f *fiber, next State) {
	r.mu.Lock()
	if f.state != StateActive {
		if next == StateDisposed {
			r.setStateLocked(f, StateDisposed)
		}
		r.mu.Unlock()
		return
	}
	act := f.act
	r.setStateLocked(f, StateUnloading)
	for _, s := range f.plugin.provide {
		if p, ok := r.services[s]; ok && p.fiber == f {
			delete(r.services, s)
		}
	}
	r.mu.Unlock()

	act.end()

	r.mu.Lock()
	f.act = nil
	f.seq = 0
	f.detail = ""
	r.setStateLocked(f, next)
	r.mu.Unlock()
	if r.log.Enabled(context.Background(), slog.LevelDebug) {
		act.Logger().Debug("unloaded", "state", next)
	}
}

func (r *Runtime) setStateLocked(f *fiber, s State) {
	if f.state != s {
		f.state = s
		f.since = time.Now()
	}
}

func sameConfig(a, b map[string]any) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}
