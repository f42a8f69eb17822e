package toolbash_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/shell"
)

var trueArgs = json.RawMessage(`{"command":"true","description":"Do nothing"}`)

// BenchmarkBashTrue compares a whole `bash` tool call of `true` (registry → validation
// → bash-local executor → rendering) with a raw os/exec of `bash -c true`, in the same
// run. The interleaved sub-benchmark alternates the two and reports their ratio, which
// is the robust figure on a busy machine.
func BenchmarkBashTrue(b *testing.B) {
	h := newReal(b, realSetup{})
	ctx := context.Background()
	tool := toolTrue(h)
	b.Run("raw-os-exec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rawTrue(b)
		}
	})
	// The executor alone (resolve → execute → result), to attribute the tool layer's cost.
	v, _ := container.Lookup(h.rt, shell.Service)
	ex := v
	b.Run("executor-only", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			spec, err := ex.Resolve(shell.ExecRequest{Command: "true"})
			if err != nil {
				b.Fatal(err)
			}
			e, err := ex.Execute(ctx, spec)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := e.Result(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bash-tool", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tool(b)
		}
	})
	b.Run("interleaved", func(b *testing.B) { interleaved(b, tool) })
}

// BenchmarkBashTrueProcessGroup is the interleaved comparison with the subprocess
// service's cgroup isolation off (process group only), to attribute that cost.
func BenchmarkBashTrueProcessGroup(b *testing.B) {
	h := newReal(b, realSetup{subprocessConfig: map[string]any{"isolation": "process-group"}})
	interleaved(b, toolTrue(h))
}

// toolTrue returns a whole `bash` tool call of `true` on h.
func toolTrue(h *realHarness) func(b *testing.B) {
	return func(b *testing.B) {
		if res := h.tools.Call(context.Background(), "bash", trueArgs, nil); res.Text != "(no output)" {
			b.Fatalf("result = %q", res.Text)
		}
	}
}

// rawTrue runs `bash -c true` with os/exec.
func rawTrue(b *testing.B) {
	if err := exec.Command("bash", "-c", "true").Run(); err != nil {
		b.Fatal(err)
	}
}

// interleaved alternates tool with a raw os/exec of `bash -c true` and reports each
// one's median and their ratio (tool/raw).
func interleaved(b *testing.B, tool func(b *testing.B)) {
	proctest.PairedWithTrue(b, "tool", func() { tool(b) })
}

// BenchmarkToolLayer is the tool's own cost around an executor that returns at once:
// registry validation, argument checks, env collection, request building, rendering.
func BenchmarkToolLayer(b *testing.B) {
	h := newHarness(b, setup{})
	h.exec.behave = func(spec shell.ExecSpec) (shell.RunResult, error) {
		return shell.RunResult{ExitCode: intp(0), TimeoutMs: spec.TimeoutMs}, nil
	}
	s, _ := newSession("bench", "/w")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		h.exec.reset()
		if res := h.tools.Call(ctx, "bash", trueArgs, s); res.Text != "(no output)" {
			b.Fatalf("result = %q", res.Text)
		}
	}
}
