package container

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Scope is what a registry needs from an activation to own a registration: a way to be
// told when the activation ends. *Activation implements it.
type Scope interface {
	// Defer runs fn when the activation ends (disposers run in reverse order).
	Defer(fn func())
	// Context is cancelled when the activation ends.
	Context() context.Context
}

// Activation is one activation of a fiber. Apply receives it and registers everything
// through it; when the activation ends (unload, dispose, failure) the context is
// cancelled, every goroutine started by Go is waited for, then every disposer runs in
// reverse order. Methods are safe for concurrent use and remain valid (as no-ops or
// lookups) after the activation ended.
type Activation struct {
	rt     *Runtime
	fiber  *fiber
	id     string // the row id, fixed for the activation (the fiber's row may be rewritten)
	ctx    context.Context
	cancel context.CancelFunc
	// replaced is the config this row ran before a reload replaced it, or nil.
	replaced any

	logOnce sync.Once
	log     *slog.Logger // built on first use: most activations never log

	mu          sync.Mutex
	ended       bool
	published   bool // Apply returned: Provide is closed
	disposers   []func()
	provided    map[string]any
	sessionEnds []func(sessionID string)
	wg          sync.WaitGroup
	goroutines  bool // Go was called: the end must wait for wg
}

// ID is the profile row id of this fiber.
func (a *Activation) ID() string { return a.id }

// PluginName is the canonical catalog name of the plugin this fiber mounts.
func (a *Activation) PluginName() string { return a.fiber.plugin.Name }

// Context is cancelled when the activation ends.
func (a *Activation) Context() context.Context { return a.ctx }

// Logger is the harness logger annotated with this row.
func (a *Activation) Logger() *slog.Logger {
	a.logOnce.Do(func() { a.log = a.rt.log.With("row", a.id, "plugin", a.fiber.plugin.Name) })
	return a.log
}

// provide records service under name for when Apply returns (Provide).
func (a *Activation) provide(name string, service any) error {
	if !a.fiber.plugin.provides(name) {
		return fmt.Errorf("%s: provide %q: not in the plugin's declared provide list", a.fiber.plugin.Name, name)
	}
	if service == nil {
		return fmt.Errorf("%s: provide %q: nil service", a.fiber.plugin.Name, name)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.published || a.ended {
		return fmt.Errorf("%s: provide %q: the activation's Apply has already returned", a.fiber.plugin.Name, name)
	}
	if a.provided == nil {
		a.provided = map[string]any{}
	}
	if _, dup := a.provided[name]; dup {
		return fmt.Errorf("%s: provide %q: already provided by this activation", a.fiber.plugin.Name, name)
	}
	a.provided[name] = service
	return nil
}

// service returns an injected service (one listed in the plugin's Inject).
func (a *Activation) service(name string) (any, error) {
	if !slices.Contains(a.fiber.plugin.inject, name) {
		return nil, fmt.Errorf("%s: service %q is not in the plugin's inject list", a.fiber.plugin.Name, name)
	}
	v, ok := a.rt.lookup(name)
	if !ok {
		return nil, fmt.Errorf("%s: injected service %q is missing", a.fiber.plugin.Name, name)
	}
	return v, nil
}

func (a *Activation) lookup(name string) (any, bool) { return a.rt.lookup(name) }

// Defer registers fn to run when the activation ends. Disposers run in reverse order of
// registration; a panicking disposer is logged and the rest still run. After the
// activation ended, fn runs at once.
func (a *Activation) Defer(fn func()) {
	a.mu.Lock()
	if a.ended {
		a.mu.Unlock()
		fn()
		return
	}
	a.disposers = append(a.disposers, fn)
	a.mu.Unlock()
}

// Go runs fn in a goroutine owned by the activation: its ctx is cancelled when the
// activation ends, and the end waits for fn to return.
func (a *Activation) Go(fn func(ctx context.Context)) {
	a.mu.Lock()
	if a.ended {
		a.mu.Unlock()
		return
	}
	a.wg.Add(1)
	a.goroutines = true
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
		defer func() {
			if p := recover(); p != nil {
				a.Logger().Error("goroutine panicked", "panic", fmt.Sprint(p))
			}
		}()
		fn(a.ctx)
	}()
}

// OnSessionEnd registers fn to run when a harness session ends (Runtime.EndSession). The
// registration is owned by the activation.
func (a *Activation) OnSessionEnd(fn func(sessionID string)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.ended {
		a.sessionEnds = append(a.sessionEnds, fn)
	}
}

// ReplacedConfig returns the config this row ran with before a profile reload replaced
// it (another config, or another plugin under the same row id), when that config was a
// C: so a plugin can tell what the reload changed — a sandbox that widens, an approval
// policy that stops asking — and say so. ok is false for a row's first activation, for
// reactivations that no reload caused, and when the row ran a plugin of another config
// type.
func ReplacedConfig[C any](a *Activation) (config C, ok bool) {
	config, ok = a.replaced.(C)
	return config, ok
}

// ProfileFiles are the files of the running composition's profile: its own file, then
// each base it extends, as read (none for a built-in profile). They may change with a
// reload; read them when needed. A confining executor keeps them out of its commands'
// reach.
func (a *Activation) ProfileFiles() []string { return a.rt.profileFilesNow() }

// Profile is the running composition's profile as status names it (the file, or the
// built-in profile's name). It may change with a reload; read it when needed.
func (a *Activation) Profile() string {
	a.rt.mu.RLock()
	defer a.rt.mu.RUnlock()
	return a.rt.profile
}

// SetDetail records a short human-readable note shown in this row's status (for
// example which process-isolation mode is active).
func (a *Activation) SetDetail(detail string) {
	a.rt.mu.Lock()
	defer a.rt.mu.Unlock()
	if a.fiber.act == a {
		a.fiber.detail = detail
	}
}

// end cancels the activation, waits for its goroutines, then runs its disposers in
// reverse order. Called by the runtime only, never under Runtime.mu.
func (a *Activation) end() {
	a.mu.Lock()
	if a.ended {
		a.mu.Unlock()
		return
	}
	a.ended = true
	goroutines := a.goroutines
	disposers := a.disposers
	a.disposers = nil
	a.sessionEnds = nil
	a.mu.Unlock()

	// Stop the activation's goroutines before undoing its registrations: a goroutine
	// must never see a registry it uses already torn down.
	a.cancel()
	if goroutines {
		waited := make(chan struct{})
		go func() { a.wg.Wait(); close(waited) }()
		t := time.NewTimer(a.rt.opts.StopTimeout)
		select {
		case <-waited:
		case <-t.C:
			a.Logger().Error("goroutines did not stop after the activation ended; continuing without them", "waited", a.rt.opts.StopTimeout)
		}
		t.Stop()
	}
	for i := len(disposers) - 1; i >= 0; i-- {
		func() {
			defer func() {
				if p := recover(); p != nil {
					a.Logger().Error("disposer panicked", "panic", fmt.Sprint(p))
				}
			}()
			disposers[i]()
		}()
	}
}

// applied closes Provide (Apply has returned) and returns what was provided.
func (a *Activation) applied() map[string]any {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.published = true
	return a.provided
}

func (a *Activation) sessionHooks() []func(string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.sessionEnds)
}
