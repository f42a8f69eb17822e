package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/tracing/internal/otlp"
)

// Tracer makes and exports the spans of tool calls.
type Tracer struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
}

// Configured reports whether the environment asks for traces: an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and neither
// OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none.
func Configured() bool {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	return !strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")), "none")
}

// FromEnv sets up the exporter the OTEL_* environment describes, or returns nil when
// it asks for no traces (Configured). The protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
// else OTEL_EXPORTER_OTLP_PROTOCOL: http/protobuf (the default) or grpc; package otlp
// reads the endpoint, headers, timeout, compression and certificates, the SDK
// the resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES), the sampler and the
// batching. version is dsh's, for service.version.
func FromEnv(ctx context.Context, version string) (*Tracer, error) {
	if !Configured() {
		return nil, nil
	}
	exp, err := exporter()
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "dsh"), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracer{provider: tp, tracer: tp.Tracer("github.com/dsh-dev/dsh")}, nil
}

// exporter is the OTLP exporter of the configured protocol.
func exporter() (sdktrace.SpanExporter, error) {
	protocol, err := otlp.Protocol()
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	cfg, err := otlp.FromEnv(protocol)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	return otlp.New(cfg), nil
}

// Shutdown exports what is left and stops the exporter, within ctx.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Observer is the registry observer that makes a call's spans.
func (t *Tracer) Observer() tools.Observer {
	return tools.Observer{Name: "tracing", Order: tools.OrderRecord, Observe: t.observe}
}

// observe makes the span of one call — parented by the client's trace context, from
// the call's start to its end — and its command's child span.
func (t *Tracer) observe(ctx context.Context, ev *tools.Event) {
	parent := context.Background()
	if tc, ok := tools.TraceContextOf(ctx); ok {
		carrier := propagation.MapCarrier{"traceparent": tc.Parent}
		if tc.State != "" {
			carrier["tracestate"] = tc.State
		}
		parent = propagation.TraceContext{}.Extract(parent, carrier)
	}
	attrs := []attribute.KeyValue{
		attribute.String("mcp.method.name", "tools/call"),
		attribute.String("gen_ai.tool.name", ev.Tool),
		attribute.String("dsh.decision", ev.Decision.Decision.String()),
	}
	if ev.Session != nil {
		attrs = append(attrs, attribute.String("dsh.session.id", ev.Session.ID))
	}
	switch {
	case ev.Deferred:
		attrs = append(attrs, attribute.String("dsh.approval", "deferred"))
	case ev.Approval != "":
		attrs = append(attrs, attribute.String("dsh.approval", string(ev.Approval)))
	}
	callCtx, span := t.tracer.Start(parent, "tools/call "+ev.Tool, trace.WithTimestamp(ev.Start),
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	if ev.Result.IsError {
		span.SetStatus(codes.Error, "")
	}
	if run, ok := tools.CommandRunOf(ev.Result); ok && !run.Start.IsZero() {
		commandSpan(callCtx, t.tracer, run)
	}
	span.End(trace.WithTimestamp(ev.Start.Add(ev.Duration)))
}

// commandSpan makes the span of a command run, a child of the call's.
func commandSpan(ctx context.Context, tracer trace.Tracer, run tools.CommandRun) {
	attrs := []attribute.KeyValue{
		attribute.Bool("dsh.timed_out", run.TimedOut),
		attribute.Int64("dsh.output.bytes", run.StdoutBytes+run.StderrBytes),
	}
	if run.ExitCode != nil {
		attrs = append(attrs, attribute.Int("process.exit.code", *run.ExitCode))
	}
	if run.SandboxMode != "" {
		attrs = append(attrs, attribute.String("dsh.sandbox.mode", run.SandboxMode))
	}
	if run.Signal != "" {
		attrs = append(attrs, attribute.String("dsh.signal", run.Signal))
	}
	_, span := tracer.Start(ctx, "exec "+run.Executor, trace.WithTimestamp(run.Start), trace.WithAttributes(attrs...))
	if run.ExitCode == nil || *run.ExitCode != 0 {
		span.SetStatus(codes.Error, "")
	}
	span.End(trace.WithTimestamp(run.End))
}

// Attach adds t's observer to the tools registry of rt, and to each registry that
// replaces it, until detach is called.
func (t *Tracer) Attach(rt *container.Runtime, log *slog.Logger) (detach func()) {
	a := &attachment{t: t, rt: rt, log: log}
	a.sync()
	cancel := rt.Subscribe(a.sync)
	return func() {
		cancel()
		a.mu.Lock()
		defer a.mu.Unlock()
		a.scope.end()
		a.reg, a.scope = nil, nil
	}
}

// attachment follows a runtime's registry.
type attachment struct {
	t   *Tracer
	rt  *container.Runtime
	log *slog.Logger

	mu    sync.Mutex
	reg   *tools.Registry
	scope *scope // owns the observer on reg
}

func (a *attachment) sync() {
	reg, _ := container.Lookup(a.rt, tools.Service)
	a.mu.Lock()
	defer a.mu.Unlock()
	if reg == a.reg {
		return
	}
	a.scope.end()
	a.reg, a.scope = reg, nil
	if reg == nil {
		return
	}
	a.scope = &scope{}
	if err := reg.Observe(a.scope, a.t.Observer()); err != nil {
		a.log.Warn("tracing: cannot observe the tool calls", "err", err)
	}
}

// scope is the lifetime of one observer registration (a container.Scope).
type scope struct {
	mu     sync.Mutex
	defers []func()
}

func (s *scope) Defer(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.defers = append(s.defers, fn)
}

func (s *scope) Context() context.Context { return context.Background() }

// end undoes the registration; nil does nothing.
func (s *scope) end() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defers := s.defers
	s.defers = nil
	s.mu.Unlock()
	for i := len(defers) - 1; i >= 0; i-- {
		defers[i]()
	}
}

// flushTimeout bounds Shutdown when the caller gives no deadline.
const flushTimeout = 5 * time.Second

// Flush is Shutdown within flushTimeout; its failure is logged.
func (t *Tracer) Flush(log *slog.Logger) {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		log.Warn("tracing: flushing the spans", "err", err)
	}
}
