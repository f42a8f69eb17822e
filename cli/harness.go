package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.uber.org/fx"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/container/profile"
	"github.com/dsh-dev/dsh/plugins/approval"
	bashlocal "github.com/dsh-dev/dsh/plugins/bashlocal"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
	bashssh "github.com/dsh-dev/dsh/plugins/bashssh"
	"github.com/dsh-dev/dsh/plugins/hooks"
	"github.com/dsh-dev/dsh/plugins/jobs"
	"github.com/dsh-dev/dsh/plugins/prompt"
	"github.com/dsh-dev/dsh/plugins/roles"
	"github.com/dsh-dev/dsh/plugins/rules"
	"github.com/dsh-dev/dsh/plugins/sessionlog"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
	"github.com/dsh-dev/dsh/plugins/ssh"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/profiles"
	"github.com/dsh-dev/dsh/tracing"
)

// Plugins is the catalog dsh ships: each plugin package's Module (container.ModuleOf).
var Plugins = fx.Options(
	approval.Module,
	bashlocal.Module,
	bashsandbox.Module,
	bashssh.Module,
	hooks.Module,
	jobs.Module,
	prompt.Module,
	roles.Module,
	rules.Module,
	sessionlog.Module,
	shellenv.Module,
	ssh.Module,
	subprocess.Module,
	toolbash.Module,
	tools.Module,
)

// harness is a started composition.
type harness struct {
	app     *fx.App
	rt      *container.Runtime
	catalog *container.Catalog
	loader  *profile.Loader
	tracing func() // detaches and flushes the tracer; nil without one
}

type harnessOptions struct {
	profile string
	watch   bool
	log     *slog.Logger
	extra   []fx.Option
}

// startHarness composes the profile through fx (catalog from the plugin modules,
// runtime, lifecycle) and starts it.
func startHarness(ctx context.Context, o harnessOptions) (*harness, error) {
	h := &harness{}
	opts := append([]fx.Option{
		profile.Module,
		Plugins,
		fx.Supply(profile.ModuleOptions{Profile: o.profile, Builtins: profiles.FS, Watch: o.watch, Logger: o.log}),
		fx.Populate(&h.rt, &h.catalog, &h.loader),
		fx.StartTimeout(time.Minute),
		fx.StopTimeout(time.Minute),
	}, o.extra...)
	h.app = fx.New(opts...)
	if err := h.app.Err(); err != nil {
		return nil, err
	}
	if err := h.app.Start(ctx); err != nil {
		return nil, fmt.Errorf("start: %w", unwrapFx(err))
	}
	h.trace(ctx, o.log)
	return h, nil
}

// trace exports the spans of the harness's tool calls when the OTEL_* environment asks
// for it (tracing.FromEnv); a configuration it cannot use is logged, and nothing is
// exported.
func (h *harness) trace(ctx context.Context, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	t, err := tracing.FromEnv(ctx, version())
	if err != nil {
		log.Warn("no traces are exported", "err", err)
	}
	if t == nil {
		return
	}
	detach := t.Attach(h.rt, log)
	h.tracing = func() { detach(); t.Flush(log) }
}

// stop disposes every fiber (and with them every process and job), then flushes the
// spans.
func (h *harness) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := h.app.Stop(ctx)
	if h.tracing != nil {
		h.tracing()
	}
	return err
}

// unwrapFx drops fx's "OnStart hook added by … failed:" wrapping so users read our error.
func unwrapFx(err error) error {
	if inner := errors.Unwrap(err); inner != nil && strings.Contains(err.Error(), " hook added by ") {
		return inner
	}
	return err
}
