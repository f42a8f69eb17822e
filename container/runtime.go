package container

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"
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

// Runtime mounts rows as fibers and keeps their activations consistent with the services
// that exist. Operations (Compose, and Mount and Unmount, which compose the mounted rows
// with one row more or less; Close) are serialized and run plugin code; EndSession runs
// session-end hooks beside them; Lookup and Status never wait for plugin code. Plugin
// code must not call the operation methods.
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
	lastReload   *Reload
	closed       bool

	subMu  sync.Mutex
	subs   map[int]func()
	nextID int

	idleMu sync.Mutex
	busy   int           // operations called and not returned
	idle   chan struct{} // closed while busy is 0 (WaitIdle)
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
	idle := make(chan struct{})
	close(idle)
	return &Runtime{
		idle:      idle,
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

// Compose makes the mounted rows match rows: it validates them as a whole first (on
// error nothing changes), then diffs by id: removed or disabled rows are disposed (in
// reverse activation order), rows whose plugin or config changed are restarted, new rows
// are mounted; untouched rows keep running. Dependents follow through the normal
// cascade. name labels the composition in status. Cost is O(rows + edges) plus the
// plugins' own work.
func (r *Runtime) Compose(name string, rows []Row) error {
	return r.compose(name, rows, nil)
}

// ComposeFiles is Compose for rows read from files (a profile and the bases it extends,
// as package profile loads them): it records the files, which plugins read through
// Activation.ProfileFiles while they apply and afterwards.
func (r *Runtime) ComposeFiles(name string, files []string, rows []Row) error {
	return r.compose(name, rows, files)
}

// profileFilesNow are the files of the running composition's profile (its own file, then
// each base it extends, as read), or none for a built-in profile or rows composed
// without a profile. A confining executor keeps them out of its commands' reach.
func (r *Runtime) profileFilesNow() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]string(nil), r.profileFiles...)
}

// ComposeChanges is ComposeFiles that also returns what it changed: the rows it
// mounted, restarted and disposed. A reload logs them and records them
// (RecordReload).
func (r *Runtime) ComposeChanges(name string, files []string, rows []Row) (Changes, error) {
	var c Changes
	err := r.operate(func() (err error) {
		c, err = r.composeLocked(name, rows, files)
		return err
	})
	return c, err
}

// compose runs Compose as one operation.
func (r *Runtime) compose(name string, rows []Row, files []string) error {
	return r.operate(func() error {
		_, err := r.composeLocked(name, rows, files)
		return err
	})
}

// Mount adds row to the composition: Compose with the mounted rows and row, under the
// composition's name and files. A row whose id is mounted already is an error, and so
// is anything Compose refuses (the whole composition is validated again).
func (r *Runtime) Mount(row Row) error {
	return r.recompose(func(rows []Row) ([]Row, error) {
		if slices.ContainsFunc(rows, func(m Row) bool { return m.ID == row.ID }) {
			return nil, &RowError{Source: row.Source, Row: row.ID, Err: errors.New("duplicate id")}
		}
		return append(rows, row), nil
	})
}

// Unmount removes the row id from the composition (Compose without it): it is disposed,
// and its dependents unload and return to pending.
func (r *Runtime) Unmount(id string) error {
	return r.recompose(func(rows []Row) ([]Row, error) {
		i := slices.IndexFunc(rows, func(m Row) bool { return m.ID == id })
		if i < 0 {
			return nil, fmt.Errorf("container: no row %q", id)
		}
		return slices.Delete(rows, i, i+1), nil
	})
}

// recompose composes edit(the mounted rows) as one operation, keeping the composition's
// name and files.
func (r *Runtime) recompose(edit func([]Row) ([]Row, error)) error {
	return r.operate(func() error {
		r.mu.RLock()
		rows := make([]Row, len(r.order))
		for i, f := range r.order {
			rows[i] = f.row
		}
		name, files := r.profile, r.profileFiles
		r.mu.RUnlock()
		rows, err := edit(rows)
		if err != nil {
			return err
		}
		_, err = r.composeLocked(name, rows, files)
		return err
	})
}

// operate runs op as one operation: after the others (op holds the operation lock, and
// runs plugin code), counted for WaitIdle, and followed by the subscribers.
func (r *Runtime) operate(op func() error) error {
	defer r.notify()
	r.beginOperation()
	defer r.endOperation()
	r.op.Lock()
	defer r.op.Unlock()
	if r.isClosed() {
		return errors.New("container: runtime is closed")
	}
	return op()
}

// composeLocked is Compose's work, with the operation lock held: validate, dispose the
// rows that went or changed, install the new order, activate what can. It returns the
// rows it mounted, restarted and disposed.
func (r *Runtime) composeLocked(name string, rows []Row, files []string) (Changes, error) {
	prepared, err := r.prepare(rows)
	if err != nil {
		return Changes{}, err
	}
	gone := r.goneFibers(prepared)
	before := r.mountedNow()
	for _, f := range gone {
		r.unload(f, StateDisposed)
	}
	r.mu.Lock()
	r.installLocked(prepared, gone)
	r.profile = name
	r.profileFiles = slices.Clone(files)
	r.mu.Unlock()
	r.reconcile(r.pendingFibers())
	return r.changes(before, gone), nil
}

// goneFibers are the mounted fibers that prepared does not keep (removed, or another
// plugin or config under their id), in the order to dispose them: reverse activation
// order, never-activated fibers last, so a removed provider's removed dependents end
// before it does.
func (r *Runtime) goneFibers(prepared []preparedRow) []*fiber {
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
	sort.SliceStable(gone, func(i, j int) bool { return gone[i].seq > gone[j].seq })
	return gone
}

// installLocked forgets the gone fibers and makes prepared the mounted order: kept fibers
// stay, new ones start pending (remembering the config of the fiber they replace), and
// the fibers that failed on a conflict with a gone one are retried.
func (r *Runtime) installLocked(prepared []preparedRow, gone []*fiber) {
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
}

// EndSession runs every active plugin's session-end hooks for id (for example, jobs
// cancels, awaits and deletes the session's jobs) and returns when they have. They run
// at the same time: each may wait for processes to end within the session's bound, and
// none waits for another's grace periods (a job's kill with its graceMs does not delay
// the executor's prompt end of the session's processes).
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
	var wg sync.WaitGroup
	for _, h := range hooks {
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					r.log.Error("session-end hook panicked", "session", id, "panic", fmt.Sprint(p))
				}
			}()
			h(id)
		})
	}
	wg.Wait()
}

// WaitIdle waits until no operation (Compose, Mount, Unmount, Close) is in progress, or
// ctx ends; it reports whether the runtime was idle. Callers that found a service or tool
// missing use it to tell a reload in progress from a real absence.
func (r *Runtime) WaitIdle(ctx context.Context) bool {
	r.idleMu.Lock()
	idle := r.idle
	r.idleMu.Unlock()
	select {
	case <-idle:
		return true
	case <-ctx.Done():
		return false
	}
}

// beginOperation counts an operation in; the first of a busy period opens a new idle
// channel, which the last one out closes (endOperation).
func (r *Runtime) beginOperation() {
	r.idleMu.Lock()
	defer r.idleMu.Unlock()
	if r.busy == 0 {
		r.idle = make(chan struct{})
	}
	r.busy++
}

func (r *Runtime) endOperation() {
	r.idleMu.Lock()
	defer r.idleMu.Unlock()
	if r.busy--; r.busy == 0 {
		close(r.idle)
	}
}

// Close disposes every fiber, active ones in reverse activation order. The runtime
// cannot be used afterwards. Close is idempotent.
func (r *Runtime) Close() {
	r.beginOperation()
	defer r.endOperation()
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
