package tracing_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/otlptest"
	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/tracing"
)

// The observer's own cost per call: two spans made, queued for the exporter.
func BenchmarkObserve(b *testing.B) {
	recv := otlptest.Start()
	defer recv.Close()
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.Endpoint())
	tr, err := tracing.FromEnv(context.Background(), "v")
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	obs := tr.Observer()
	code := 0
	now := time.Now()
	ev := &tools.Event{Tool: "bash", Session: &container.Session{ID: "s"}, Decision: tools.Verdict{Decision: tools.Allow}, Ran: true, Start: now, Duration: time.Millisecond,
		Result: &tools.Result{Text: "(no output)", Value: ran{tools.CommandRun{Executor: "bash-local", ExitCode: &code, Start: now, End: now.Add(time.Millisecond)}}}}
	ctx := tools.WithTraceContext(context.Background(), tools.TraceContext{Parent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
	b.ReportAllocs()
	for b.Loop() {
		obs.Observe(ctx, ev)
	}
}
