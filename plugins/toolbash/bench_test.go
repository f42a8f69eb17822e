package toolbash_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/jobs"
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

// BenchmarkBashTrueTTY alternates a `bash` tool call of `true` under a terminal with a
// plain one and reports each one's median and their ratio (tty/plain): what allocating
// and reading a terminal adds to a call.
func BenchmarkBashTrueTTY(b *testing.B) {
	h := newReal(b, realSetup{})
	ttyArgs := json.RawMessage(`{"command":"true","description":"Do nothing","tty":true}`)
	var tty, plain []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if res := h.tools.Call(context.Background(), "bash", ttyArgs, nil); res.Text != "(no output)" {
			b.Fatalf("tty result = %q", res.Text)
		}
		t1 := time.Now()
		if res := h.tools.Call(context.Background(), "bash", trueArgs, nil); res.Text != "(no output)" {
			b.Fatalf("result = %q", res.Text)
		}
		t2 := time.Now()
		tty, plain = append(tty, t1.Sub(t0)), append(plain, t2.Sub(t1))
	}
	m, p := proctest.Median(tty), proctest.Median(plain)
	b.ReportMetric(float64(m.Nanoseconds()), "tty-median-ns")
	b.ReportMetric(float64(p.Nanoseconds()), "plain-median-ns")
	b.ReportMetric(float64(m)/float64(p), "tty/plain")
}

// BenchmarkJobWriteRoundTrip types `echo x` into an interactive bash running as a tty
// job and waits until the job's output shows x: job_write (through the registry, with
// wait_ms 0: the write and a read, without job_write's 200 ms wait for quiet, which is
// by design) and job_output reads until the answer is there. It reports the median
// round trip (p50-ms).
func BenchmarkJobWriteRoundTrip(b *testing.B) {
	h := newReal(b, realSetup{})
	s, _ := newSession("bench", h.cwd)
	res := h.call(b, s, "bash", bashArgs("PS1='$ ' exec bash --norc --noprofile -i", `"tty":true`, `"run_in_background":true`))
	id, ok := strings.CutPrefix(res.Text, "started background job ")
	if !ok {
		b.Fatalf("start: %q", res.Text)
	}
	// read returns a job tool's new output (its typed value's).
	read := func(tool, args string) string {
		res := h.tools.Call(context.Background(), tool, json.RawMessage(args), s)
		v, ok := res.Value.(jobs.OutputValue)
		if !ok {
			b.Fatalf("%s: %q", tool, res.Text)
		}
		return v.Output
	}
	var seen strings.Builder
	waitFor(b, 10*time.Second, "the prompt", func() bool {
		seen.WriteString(read("job_output", `{"job_id":"`+id+`"}`))
		return strings.Contains(seen.String(), "$ ")
	})
	write := `{"job_id":"` + id + `","input":"echo x\n","wait_ms":0}`
	poll := `{"job_id":"` + id + `"}`
	var trips []time.Duration
	for b.Loop() {
		seen.Reset()
		t0 := time.Now()
		seen.WriteString(read("job_write", write))
		for !strings.Contains(seen.String(), "echo x\nx\n") {
			if time.Since(t0) > 10*time.Second {
				b.Fatalf("no answer: %.200q", seen.String())
			}
			runtime.Gosched()
			seen.WriteString(read("job_output", poll))
		}
		trips = append(trips, time.Since(t0))
	}
	b.ReportMetric(float64(proctest.Median(trips).Microseconds())/1000, "p50-ms")
	read("job_write", `{"job_id":"`+id+`","input":"exit\n","wait_ms":0}`)
	read("job_output", `{"job_id":"`+id+`","wait":true}`)
}
