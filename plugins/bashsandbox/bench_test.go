package bashsandbox_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/shell"
	"github.com/dsh-dev/dsh/shell/bashexec"
)

// benchRig is one Supervisor with the local executor and a sandboxed one per mode, over
// the same configuration, in a workspace of its own.
type benchRig struct {
	sup       *subprocess.Supervisor
	ws        string
	local     shell.Executor
	sandboxed map[string]shell.Executor
}

func newBenchRig(b *testing.B) *benchRig {
	sup := subprocess.New(subprocess.Options{Logger: quietLogger()})
	b.Cleanup(sup.Close)
	ws, _ := os.MkdirTemp("", "dsh-sandbox-bench-")
	b.Cleanup(func() { os.RemoveAll(ws) })
	local, err := bashexec.New(sup.Spawner(), bashexec.Config{Cwd: ws, TimeoutMs: 120000, MaxTimeoutMs: 600000,
		MaxOutputBytes: 64000, MaxSpillBytes: 67108864, GraceMs: 3000}, bashexec.Options{Name: "bash-local"})
	if err != nil {
		b.Fatal(err)
	}
	r := &benchRig{sup: sup, ws: ws, local: local, sandboxed: map[string]shell.Executor{}}
	for _, mode := range []string{shell.ModeReadOnly, shell.ModeWorkspaceWrite, shell.ModeDangerFullAccess} {
		cfg := bashsandbox.DefaultConfig()
		cfg.Cwd, cfg.DefaultMode = ws, mode
		ex, _, err := bashsandbox.New(sup, cfg, quietLogger(), nil)
		if err != nil {
			b.Fatal(err)
		}
		r.sandboxed[mode] = ex
	}
	return r
}

// run runs command once (in session id, "" for none) and checks it exited 0.
func (r *benchRig) run(b *testing.B, ex shell.Executor, id, command string) {
	ctx := context.Background()
	spec, err := ex.Resolve(shell.ExecRequest{Command: command, SessionID: id})
	if err != nil {
		b.Fatal(err)
	}
	e, err := ex.Execute(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	res, err := e.Result(ctx)
	if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
		b.Fatalf("%s: %+v, %v", command, res, err)
	}
}

// BenchmarkExecutorTrue: `true` through the same executor path (Resolve, Execute,
// Result over one subprocess Supervisor) locally — exactly what bash-local runs — and
// confined by bash-sandbox in each mode, in the same run (the box is made
// by the first call and reused). The ratio-* benchmarks alternate a local and a
// sandboxed call in every iteration and report both means and sandboxed/local (target
// ≤ 1.5).
func BenchmarkExecutorTrue(b *testing.B) {
	r := newBenchRig(b)
	run := func(ex shell.Executor) func(b *testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.run(b, ex, "", "true")
			}
		}
	}
	modes := []string{shell.ModeReadOnly, shell.ModeWorkspaceWrite, shell.ModeDangerFullAccess}
	b.Run("local", run(r.local))
	for _, mode := range modes {
		b.Run("sandbox-"+mode, run(r.sandboxed[mode]))
	}
	for _, mode := range modes {
		b.Run("ratio-"+mode, func(b *testing.B) {
			var tl, ts time.Duration
			n := 0
			for b.Loop() {
				t0 := time.Now()
				r.run(b, r.local, "", "true")
				t1 := time.Now()
				r.run(b, r.sandboxed[mode], "", "true")
				ts += time.Since(t1)
				tl += t1.Sub(t0)
				n++
			}
			b.ReportMetric(float64(tl.Microseconds())/1000/float64(n), "local-ms/op")
			b.ReportMetric(float64(ts.Microseconds())/1000/float64(n), "sandbox-ms/op")
			b.ReportMetric(float64(ts)/float64(tl), "sandbox/local")
		})
	}
}

// BenchmarkSessionSetup: the per-session cost, a new session's first confined `true`
// (the box is built: namespaces, mounts, the pinned workspace) against a
// later `true` in an existing session, in the same run; the session is ended after each
// iteration.
func BenchmarkSessionSetup(b *testing.B) {
	r := newBenchRig(b)
	ex := r.sandboxed[shell.ModeWorkspaceWrite]
	r.run(b, ex, "warm", "true")
	var first, later time.Duration
	n := 0
	for b.Loop() {
		id := fmt.Sprintf("s%d", n)
		t0 := time.Now()
		r.run(b, ex, id, "true")
		t1 := time.Now()
		r.run(b, ex, "warm", "true")
		later += time.Since(t1)
		first += t1.Sub(t0)
		bashsandbox.EndSession(r.sup, id)
		n++
	}
	b.ReportMetric(float64(first.Microseconds())/1000/float64(n), "first-call-ms")
	b.ReportMetric(float64(later.Microseconds())/1000/float64(n), "later-call-ms")
	b.ReportMetric(float64(first-later)/float64(n)/1e6, "setup-ms")
}

// BenchmarkConcurrent50: 50 sandboxed `true` at once in one session, against 50 local
// ones, in the same run.
func BenchmarkConcurrent50(b *testing.B) {
	r := newBenchRig(b)
	ex := r.sandboxed[shell.ModeWorkspaceWrite]
	r.run(b, ex, "c", "true")
	burst := func(ex shell.Executor, id string) time.Duration {
		t0 := time.Now()
		var wg sync.WaitGroup
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.run(b, ex, id, "true")
			}()
		}
		wg.Wait()
		return time.Since(t0)
	}
	var tl, ts time.Duration
	n := 0
	for b.Loop() {
		tl += burst(r.local, "")
		ts += burst(ex, "c")
		n++
	}
	b.ReportMetric(float64(tl.Microseconds())/1000/float64(n), "local-50-ms")
	b.ReportMetric(float64(ts.Microseconds())/1000/float64(n), "sandbox-50-ms")
	b.ReportMetric(float64(ts)/float64(tl), "sandbox/local")
}

// BenchmarkLimitsTrue alternates a sandboxed `true` (workspace-write) under the
// default limits (processes 1024, sessionProcesses 4096) and with every limit of
// bash-sandbox set, against one with no limit, in every iteration, and reports the
// medians and their ratio (target ≤ 1.03).
func BenchmarkLimitsTrue(b *testing.B) {
	sup := subprocess.New(subprocess.Options{Logger: quietLogger()})
	b.Cleanup(sup.Close)
	ws, _ := os.MkdirTemp("", "dsh-sandbox-bench-")
	b.Cleanup(func() { os.RemoveAll(ws) })
	newEx := func(l bashsandbox.Limits) shell.Executor {
		cfg := bashsandbox.DefaultConfig()
		cfg.Cwd, cfg.DefaultMode, cfg.Limits = ws, shell.ModeWorkspaceWrite, l
		ex, _, err := bashsandbox.New(sup, cfg, quietLogger(), nil)
		if err != nil {
			b.Skip(err)
		}
		return ex
	}
	zero, cpus := 0.0, float64(runtime.NumCPU())
	none := newEx(bashsandbox.Limits{LimitsConfig: bashexec.LimitsConfig{Processes: &zero, SessionProcesses: &zero}})
	for _, tc := range []struct {
		name   string
		limits bashsandbox.Limits
	}{
		{"defaults", bashsandbox.Limits{}},
		// CPU quotas of all the host's CPUs, which cannot bind (none is written), and
		// half a CPU below that, which can.
		{"all", bashsandbox.Limits{LimitsConfig: bashexec.LimitsConfig{Memory: "1GiB", Processes: ptr(1000), CPUs: ptr(cpus),
			SessionMemory: "4GiB", SessionProcesses: ptr(4000), SessionCPUs: ptr(cpus)}}},
		{"all-binding", bashsandbox.Limits{LimitsConfig: bashexec.LimitsConfig{Memory: "1GiB", Processes: ptr(1000), CPUs: ptr(cpus - 0.5),
			SessionMemory: "4GiB", SessionProcesses: ptr(4000), SessionCPUs: ptr(cpus - 0.5)}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			limited := newEx(tc.limits)
			r := &benchRig{sup: sup, ws: ws}
			r.run(b, limited, "bench", "true") // the session's box
			r.run(b, none, "bench", "true")
			var with, without []time.Duration
			for i := 0; b.Loop(); i++ {
				for _, side := range [2]bool{i%2 == 0, i%2 != 0} {
					t0 := time.Now()
					if side {
						r.run(b, limited, "bench", "true")
						with = append(with, time.Since(t0))
					} else {
						r.run(b, none, "bench", "true")
						without = append(without, time.Since(t0))
					}
				}
			}
			w, wo := proctest.Median(with), proctest.Median(without)
			b.ReportMetric(float64(w.Nanoseconds()), "limits-median-ns")
			b.ReportMetric(float64(wo.Nanoseconds()), "none-median-ns")
			b.ReportMetric(float64(w)/float64(wo), "limits/none")
		})
	}
}

func ptr(v float64) *float64 { return &v }
