package container

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"
)

// Scope is what a registry needs from an activation to own a registration: a way to be
// told when the activation ends. *Context implements it.
type Scope interface {
	// Defer runs fn when the activation ends (disposers run in reverse order).
	Defer(fn func())
	// Context is cancelled when the activation ends.
	Context() context.Context
}

// Context is one activation of a fiber. Apply receives it and registers everything
// through it; when the activation ends (unload, dispose, failure) the context is
// cancelled, every goroutine started by Go is waited for, then every disposer runs in
// reverse order. Methods are safe for concurrent use and remain valid (as no-ops or
// lookups) after the activation ended.
type Context struct {
	rt     *Runtime
	fiber  *fiber
	id     string // the row id, fixed for the activation (the fiber's row may be rewritten)
	ctx    context.Context
	cancel context.CancelFunc

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
func (c *Context) ID() string { return c.id }

// PluginName is the canonical catalog name of the plugin this fiber mounts.
func (c *Context) PluginName() string { return c.fiber.plugin.Name }

// Context is cancelled when the activation ends.
func (c *Context) Context() context.Context { return c.ctx }

// Logger is the harness logger annotated with this row.
func (c *Context) Logger() *slog.Logger {
	c.logOnce.Do(func() { c.log = c.rt.log.With("row", c.id, "plugin", c.fiber.plugin.Name) })
	return c.log
}

// Provide publishes service under name. name must be in the plugin's Provide list; the
// service becomes visible to others when Apply returns successfully. Provide is only
// valid while Apply runs.
func (c *Context) Provide(name string, service any) error {
	if !c.fiber.plugin.provides(name) {
		return fmt.Errorf("%s: provide %q: not in the plugin's declared provide list", c.fiber.plugin.Name, name)
	}
	if service == nil {
		return fmt.Errorf("%s: provide %q: nil service", c.fiber.plugin.Name, name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.published || c.ended {
		return fmt.Errorf("%s: provide %q: the activation's Apply has already returned", c.fiber.plugin.Name, name)
	}
	if c.provided == nil {
		c.provided = map[string]any{}
	}
	if _, dup := c.provided[name]; dup {
		return fmt.Errorf("%s: provide %q: already provided by this activation", c.fiber.plugin.Name, name)
	}
	c.provided[name] = service
	return nil
}

// Service returns an injected service (one listed in the plugin's Inject). It is stable
// for the whole activation: when the provider goes away this activation ends first.
func (c *Context) Service(name string) (any, error) {
	if !slices.Contains(c.fiber.plugin.Inject, name) {
		return nil, fmt.Errorf("%s: service %q is not in the plugin's inject list", c.fiber.plugin.Name, name)
	}
	v, ok := c.rt.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%s: injected service %q is missing", c.fiber.plugin.Name, name)
	}
	return v, nil
}

// Lookup returns the service currently provided under name, if any. Use it at call time
// for optional services (jobs, approval) that a plugin does not inject.
func (c *Context) Lookup(name string) (any, bool) { return c.rt.Lookup(name) }

// Defer registers fn to run when the activation ends. Disposers run in reverse order of
// registration; a panicking disposer is logged and the rest still run. After the
// activation ended, fn runs at once.
func (c *Context) Defer(fn func()) {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		fn()
		return
	}
	c.disposers = append(c.disposers, fn)
	c.mu.Unlock()
}

// Go runs fn in a goroutine owned by the activation: its ctx is cancelled when the
// activation ends, and the end waits for fn to return.
func (c *Context) Go(fn func(ctx context.Context)) {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	c.wg.Add(1)
	c.goroutines = true
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		defer func() {
			if p := recover(); p != nil {
				c.Logger().Error("goroutine panicked", "panic", fmt.Sprint(p))
			}
		}()
		fn(c.ctx)
	}()
}

// OnSessionEnd registers fn to run when a harness session ends (Runtime.EndSession). The
// registration is owned by the activation.
func (c *Context) OnSessionEnd(fn func(sessionID string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ended {
		c.sessionEnds = append(c.sessionEnds, fn)
	}
}

// ProfileFiles are the files of the running composition's profile (see
// Runtime.ProfileFiles). They may change with a reload; read them when needed.
func (c *Context) ProfileFiles() []string { return c.rt.ProfileFiles() }

// SetDetail records a short human-readable note shown in this row's status (for
// example which process-isolation mode is active).
func (c *Context) SetDetail(detail string) {
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	if c.fiber.act == c {
		c.fiber.detail = detail
	}
}

// Injected returns the injected service name as a T.
func Injected[T any](c *Context, name string) (T, error) {
	var zero T
	v, err := c.Service(name)
	if err != nil {
		return zero, err
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("%s: injected service %q is %T, want %v", c.fiber.plugin.Name, name, v, reflect.TypeFor[T]())
	}
	return t, nil
}

// LookupAs returns the service currently provided under name if it exists and is a T.
func LookupAs[T any](c *Context, name string) (T, bool) {
	return LookupService[T](c.rt, name)
}

// end cancels the activation, waits for its goroutines, then runs its disposers in
// reverse order. Called by the runtime only, never under Runtime.mu.
func (c *Context) end() {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	c.ended = true
	goroutines := c.goroutines
	disposers := c.disposers
	c.disposers = nil
	c.sessionEnds = nil
	c.mu.Unlock()

	// Stop the activation's goroutines before undoing its registrations: a goroutine
	// must never see a registry it uses already torn down.
	c.cancel()
	if goroutines {
		waited := make(chan struct{})
		go func() { c.wg.Wait(); close(waited) }()
		t := time.NewTimer(c.rt.opts.StopTimeout)
		select {
		case <-waited:
		case <-t.C:
			c.Logger().Error("goroutines did not stop after the activation ended; continuing without them", "waited", c.rt.opts.StopTimeout)
		}
		t.Stop()
	}
	for i := len(disposers) - 1; i >= 0; i-- {
		func() {
			defer func() {
				if p := recover(); p != nil {
					c.Logger().Error("disposer panicked", "panic", fmt.Sprint(p))
				}
			}()
			disposers[i]()
		}()
	}
}

// applied closes Provide (Apply has returned) and returns what was provided.
func (c *Context) applied() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.published = true
	return c.provided
}

func (c *Context) sessionHooks() []func(string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sessionEnds)
}
