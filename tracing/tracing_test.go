package tracing_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/otlptest"
	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/tracing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// ran is a result value that reports a command run.
type ran struct{ run tools.CommandRun }

func (r ran) CommandRun() tools.CommandRun { return r.run }

// compose is a runtime with the tools registry and a tool that "ran" a command.
func compose(t *testing.T) *container.Runtime {
	t.Helper()
	tool := container.Define(container.Declaration[container.NoConfig]{
		Name: "fake", Inject: container.Keys{tools.Service},
		Apply: func(a *container.Activation, _ container.NoConfig) error {
			reg, _ := container.Injected(a, tools.Service)
			return reg.Register(a, tools.Tool{Name: "bash", Execute: func(context.Context, tools.Call) (tools.Result, error) {
				code := 3
				start := time.Now()
				time.Sleep(2 * time.Millisecond)
				return tools.Result{Text: "x\n[exit code: 3]", Value: ran{tools.CommandRun{Executor: "bash-sandbox", SandboxMode: "read-only",
					ExitCode: &code, StdoutBytes: 10, StderrBytes: 5, Start: start, End: time.Now()}}}, nil
			}})
		},
	})
	cat, err := container.NewCatalog(tools.Plugin, tool)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{Logger: quiet})
	t.Cleanup(rt.Close)
	if err := rt.Compose("test", []container.Row{{ID: "tools", Plugin: "tools"}, {ID: "fake", Plugin: "fake"}}); err != nil {
		t.Fatal(err)
	}
	return rt
}

func call(t *testing.T, rt *container.Runtime, ctx context.Context) {
	t.Helper()
	reg, _ := container.Lookup(rt, tools.Service)
	reg.Call(ctx, "bash", json.RawMessage(`{}`), &container.Session{ID: "s-trace"})
}

// Without an OTLP endpoint nothing is set up.
func TestNotConfigured(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	if tr, err := tracing.FromEnv(context.Background(), "v"); tr != nil || err != nil {
		t.Fatalf("%v %v", tr, err)
	}
	for k, v := range map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "none"} {
		t.Run(k, func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
			t.Setenv(k, v)
			if tracing.Configured() {
				t.Fatalf("%s=%s still exports", k, v)
			}
		})
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	if _, err := tracing.FromEnv(context.Background(), "v"); err == nil || err.Error() != `tracing: OTEL_EXPORTER_OTLP_PROTOCOL "http/json" is not supported (http/protobuf or grpc)` {
		t.Fatalf("%v", err)
	}
}

// A call carrying a traceparent makes a span whose parent is the client's, with the
// call's attributes, and a child span of its command with the command's.
func TestSpansReachTheReceiver(t *testing.T) {
	recv := otlptest.Start()
	defer recv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.Endpoint())
	t.Setenv("OTEL_SERVICE_NAME", "")
	tr, err := tracing.FromEnv(context.Background(), "1.2.3")
	if err != nil || tr == nil {
		t.Fatalf("%v %v", tr, err)
	}
	rt := compose(t)
	detach := tr.Attach(rt, quiet)
	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	ctx := tools.WithTraceContext(context.Background(), tools.TraceContext{Parent: "00-" + traceID + "-" + parentID + "-01", State: "vendor=x"})
	call(t, rt, ctx)
	detach()
	call(t, rt, ctx) // detached: no span
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := recv.Spans()
	if len(spans) != 2 || len(recv.Refused()) != 0 {
		t.Fatalf("spans %+v, refused %q", spans, recv.Refused())
	}
	var callSpan, execSpan otlptest.Span
	for _, s := range spans {
		switch s.Name {
		case "tools/call bash":
			callSpan = s
		case "exec bash-sandbox":
			execSpan = s
		}
	}
	if callSpan.TraceID != traceID || callSpan.ParentID != parentID {
		t.Fatalf("call span %+v", callSpan)
	}
	if execSpan.TraceID != traceID || execSpan.ParentID != callSpan.SpanID {
		t.Fatalf("exec span %+v (call %s)", execSpan, callSpan.SpanID)
	}
	want := map[string]any{"gen_ai.tool.name": "bash", "dsh.session.id": "s-trace", "dsh.decision": "allow", "mcp.method.name": "tools/call"}
	for k, v := range want {
		if callSpan.Attributes[k] != v {
			t.Errorf("call span %s = %v, want %v", k, callSpan.Attributes[k], v)
		}
	}
	wantExec := map[string]any{"process.exit.code": int64(3), "dsh.sandbox.mode": "read-only", "dsh.timed_out": false, "dsh.output.bytes": int64(15)}
	for k, v := range wantExec {
		if execSpan.Attributes[k] != v {
			t.Errorf("exec span %s = %v, want %v", k, execSpan.Attributes[k], v)
		}
	}
	if !(callSpan.Start <= execSpan.Start && execSpan.End <= callSpan.End && execSpan.Start < execSpan.End) {
		t.Errorf("times: call %d..%d, exec %d..%d", callSpan.Start, callSpan.End, execSpan.Start, execSpan.End)
	}
	if callSpan.Resource["service.name"] != "dsh" || callSpan.Resource["service.version"] != "1.2.3" {
		t.Errorf("resource %v", callSpan.Resource)
	}
}
