package container

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"sort"
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

	config, err := decodeConfig(f.plugin, f.row)
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
