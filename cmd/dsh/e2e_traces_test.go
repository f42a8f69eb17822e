package main_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/internal/otlptest"
)

// Traces through `dsh serve`: pointed at an OTLP/HTTP receiver (decoding with the
// official OTLP protos), a call carrying a traceparent in its _meta is a span whose
// parent is the client's, with a child span of its (sandboxed) command and their
// attributes.
func TestServeTraces(t *testing.T) {
	recv := otlptest.Start()
	defer recv.Close()
	checkServeTraces(t, recv)
}

// The same over OTLP/gRPC, to grpc-go's server, compressed.
func TestServeTracesGRPC(t *testing.T) {
	recv := otlptest.StartGRPC()
	defer recv.Close()
	checkServeTraces(t, recv, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_EXPORTER_OTLP_COMPRESSION=gzip")
}

func checkServeTraces(t *testing.T, recv *otlptest.Receiver, env ...string) {
	t.Helper()
	ws := t.TempDir()
	env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+recv.Endpoint(), "OTEL_SERVICE_NAME=dsh-e2e")
	c := startServe(t, clientOptions{env: env}, "--profile", "sandbox", "--workspace", ws)
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Meta: mcp.Meta{"traceparent": "00-" + traceID + "-" + parentID + "-01"},
		Arguments: map[string]any{"command": "echo traced; exit 4", "description": "Run a traced command"}})
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	c.Close()
	_ = c.cmd.Wait() // the spans are flushed before dsh exits
	var call, exec *otlptest.Span
	for _, s := range recv.Spans() {
		switch s.Name {
		case "tools/call bash":
			call = &s
		case "exec bash-sandbox":
			exec = &s
		}
	}
	if call == nil || exec == nil {
		t.Fatalf("spans %+v (refused %q)", recv.Spans(), recv.Refused())
	}
	if call.TraceID != traceID || call.ParentID != parentID || exec.TraceID != traceID || exec.ParentID != call.SpanID {
		t.Fatalf("call %+v\nexec %+v", call, exec)
	}
	if call.Attributes["gen_ai.tool.name"] != "bash" || call.Attributes["dsh.decision"] != "allow" || call.Attributes["dsh.session.id"] == "" ||
		call.Resource["service.name"] != "dsh-e2e" {
		t.Errorf("call attributes %v (resource %v)", call.Attributes, call.Resource)
	}
	if exec.Attributes["process.exit.code"] != int64(4) || exec.Attributes["dsh.timed_out"] != false || exec.Attributes["dsh.output.bytes"] != int64(7) ||
		exec.Attributes["dsh.sandbox.mode"] != "workspace-write" {
		t.Errorf("command attributes %v", exec.Attributes)
	}
	if !(call.Start <= exec.Start && exec.Start < exec.End && exec.End <= call.End) {
		t.Errorf("times: call %d..%d, command %d..%d", call.Start, call.End, exec.Start, exec.End)
	}
}
