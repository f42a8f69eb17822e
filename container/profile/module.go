package profile

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"github.com/dsh-dev/dsh/container"
)

// ModuleOptions configure Module; supply them with fx.Supply. Without them Module builds
// the catalog and an empty runtime and composes nothing.
type ModuleOptions struct {
	// Profile is the profile to compose on start: a built-in name or a file path.
	// Empty composes nothing.
	Profile string
	// Builtins holds the built-in profiles ("<name>.yaml"), e.g. profiles.FS.
	Builtins fs.FS
	// Watch reloads the profile when its file (or a base's) changes. Built-in profiles
	// are never watched.
	Watch bool
	// Debounce is the reloader's quiet period (default DefaultDebounce).
	Debounce time.Duration
	// Logger receives runtime, reload and fx logs (default: slog.Default()). fx's own
	// events are logged at debug level, its errors at error level.
	Logger *slog.Logger
	// Runtime configures the runtime; its Logger defaults to Logger.
	Runtime container.Options
}

type moduleIn struct {
	fx.In
	Opts ModuleOptions `optional:"true"`
}

// options returns the supplied options, or the zero ones, with defaults applied.
func (in moduleIn) options() ModuleOptions {
	o := in.Opts
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Runtime.Logger == nil {
		o.Runtime.Logger = o.Logger
	}
	return o
}

// Module wires a runtime composed from a profile into an fx application: it builds the
// *container.Catalog from every plugin a container.ModuleOf contributed (container.Module:
// a duplicate name or alias fails fx.New), provides the *container.Runtime and the
// *Loader, logs fx events on slog, and ties the composition to the application's
// lifecycle:
//   - OnStart loads the profile, validates and composes it (an invalid profile fails
//     the start; a plugin that fails to apply is only that row's failure) and, with
//     Watch, starts a Reloader. It returns once the composition is mounted, or with an
//     error naming the rows still loading when the start deadline passes first.
//   - OnStop stops the reloader, then closes the runtime: every fiber is disposed in
//     reverse activation order.
//
// Configure it with fx.Supply(profile.ModuleOptions{...}).
var Module = fx.Options(
	container.Module,
	fx.WithLogger(func(in moduleIn) fxevent.Logger {
		l := &fxevent.SlogLogger{Logger: in.options().Logger}
		l.UseLogLevel(slog.LevelDebug)
		l.UseErrorLevel(slog.LevelDebug) // fx returns every error it logs; the caller reports it once
		return l
	}),
	fx.Module("profile",
		fx.Provide(
			newModuleRuntime,
			newModuleLoader,
		),
		fx.Invoke(startModule),
	),
)

func newModuleRuntime(c *container.Catalog, in moduleIn) *container.Runtime {
	return container.NewRuntime(c, in.options().Runtime)
}

func newModuleLoader(c *container.Catalog, in moduleIn) *Loader {
	l := NewLoader(in.options().Builtins)
	l.Catalog = c
	return l
}

func startModule(lc fx.Lifecycle, rt *container.Runtime, loader *Loader, in moduleIn) {
	opts := in.options()
	var reloader *Reloader
	lc.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			if opts.Profile == "" {
				return nil
			}
			p, err := loader.Load(opts.Profile)
			if err != nil {
				return err
			}
			// Compose runs plugin code: honour the start deadline even if an apply hangs.
			done := make(chan error, 1)
			go func() { done <- rt.ComposeFiles(p.Name, p.Files, p.Rows) }()
			select {
			case err = <-done:
			case <-ctx.Done():
				go func() { <-done; rt.Close() }() // whenever the hung apply returns
				err := fmt.Errorf("profile %s: the composition did not finish before the start deadline (%w); still loading: %s",
					p.Name, ctx.Err(), strings.Join(loadingRows(rt), ", "))
				opts.Logger.Error("start failed", "err", err) // fx may report only the deadline
				return err
			}
			if err != nil {
				return err // validation errors name the file, row and key
			}
			warnStuck(opts.Logger, rt, p.Rows)
			if opts.Watch && p.Path != "" {
				reloader, err = NewReloader(rt, loader, p, ReloadOptions{Debounce: opts.Debounce, Logger: opts.Logger})
				if err != nil {
					rt.Close()
					return err
				}
			}
			return nil
		},
		OnStop: func(context.Context) error {
			if reloader != nil {
				reloader.Close()
			}
			rt.Close()
			return nil
		},
	})
}

func loadingRows(rt *container.Runtime) []string {
	var ids []string
	for _, rs := range rt.Status().Rows {
		if rs.State == container.StateLoading {
			ids = append(ids, fmt.Sprintf("%q", rs.ID))
		}
	}
	return ids
}

// warnStuck logs the rows of a composition that can never activate: a row waiting for
// a service no enabled row provides is easy to miss, because nothing fails.
func warnStuck(log *slog.Logger, rt *container.Runtime, rows []container.Row) {
	if err := rt.CheckActivation(rows); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			log.Warn("profile row stays pending: " + line)
		}
	}
}
