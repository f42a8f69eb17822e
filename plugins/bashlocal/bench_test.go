package bashlocal_test

import (
	"bytes"
	"context"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/kits/limitstest"
	bashlocal "github.com/dsh-dev/dsh/plugins/bashlocal"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/shell"
	"github.com/dsh-dev/dsh/shell/bashexec"
)

// Each benchmark has the floor it is compared with as a sibling sub-benchmark, so one
// run measures both:
//
//	go test -run '^$' -bench . -benchmem ./plugins/bashlocal/
func BenchmarkTrue(b *testing.B) {
	call := func(b *testing.B, ex shell.Executor) {
		ctx := context.Background()
		req := shell.ExecRequest{Command: "true"}
		b.ReportAllocs()
		for b.Loop() {
			spec, err := ex.Resolve(req)
			if err != nil {
				b.Fatal(err)
			}
			x, err := ex.Execute(ctx, spec)
			if err != nil {
				b.Fatal(err)
			}
			res, err := x.Result(ctx)
			if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
				b.Fatalf("%+v %v", res, err)
			}
		}
	}
	b.Run("dsh", func(b *testing.B) {
		_, ex := compose(b, nil, nil)
		call(b, ex)
	})
	b.Run("dsh-process-group", func(b *testing.B) {
		_, ex := compose(b, map[string]any{"isolation": "process-group"}, nil)
		call(b, ex)
	})
	b.Run("os-exec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command("bash", "-c", "true")
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

const gigabyte = 1_000_000_000

func BenchmarkOutput1GB(b *testing.B) {
	const command = "head -c 1000000000 /dev/zero"
	b.Run("dsh", func(b *testing.B) {
		_, ex := compose(b, nil, nil)
		ctx := context.Background()
		b.SetBytes(gigabyte)
		b.ReportAllocs()
		for b.Loop() {
			spec, _ := ex.Resolve(shell.ExecRequest{Command: command})
			x, err := ex.Execute(ctx, spec)
			if err != nil {
				b.Fatal(err)
			}
			res, err := x.Result(ctx)
			if err != nil || !res.Stdout.Truncated || len(res.Stdout.Text) != 64000 {
				b.Fatalf("%+v %v", res.Stdout.Truncated, err)
			}
		}
	})
	b.Run("raw-pipe", func(b *testing.B) {
		b.SetBytes(gigabyte)
		b.ReportAllocs()
		for b.Loop() {
			if n := proctest.RawRead(b, command); n != gigabyte {
				b.Fatal(n)
			}
		}
	})
}

// BenchmarkTruePaired alternates one dsh call and one raw os/exec call per iteration and
// reports the median time of each and their ratio, so that load from other processes
// on the machine affects both sides alike. This is the figure to read on a busy machine.
func BenchmarkTruePaired(b *testing.B) {
	_, ex := compose(b, nil, nil)
	ctx := context.Background()
	proctest.PairedWithTrue(b, "dsh", func() {
		spec, _ := ex.Resolve(shell.ExecRequest{Command: "true"})
		x, err := ex.Execute(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		if res, err := x.Result(ctx); err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
			b.Fatalf("%+v %v", res, err)
		}
	})
}

// BenchmarkOutput1GBPaired is the paired form of BenchmarkOutput1GB: it reports the
// captured throughput as a fraction of the raw pipe's.
func BenchmarkOutput1GBPaired(b *testing.B) {
	_, ex := compose(b, nil, nil)
	ctx := context.Background()
	const command = "head -c 1000000000 /dev/zero"
	var dsh, raw time.Duration
	for b.Loop() {
		t0 := time.Now()
		spec, _ := ex.Resolve(shell.ExecRequest{Command: command})
		x, err := ex.Execute(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		if res, err := x.Result(ctx); err != nil || !res.Stdout.Truncated {
			b.Fatal(err)
		}
		t1 := time.Now()
		if n := proctest.RawRead(b, command); n != gigabyte {
			b.Fatal(n)
		}
		t2 := time.Now()
		dsh += t1.Sub(t0)
		raw += t2.Sub(t1)
	}
	b.ReportMetric(gigabyte/dsh.Seconds()*float64(b.N)/1e6, "dsh-MB/s")
	b.ReportMetric(gigabyte/raw.Seconds()*float64(b.N)/1e6, "raw-MB/s")
	b.ReportMetric(float64(raw)/float64(dsh), "dsh-speed/raw")
}

// BenchmarkLimitsTrue alternates `true` with resource limits and without, through one
// Supervisor, in every iteration, and reports the median of each and their ratio
// (target ≤ 1.03): with limits of every kind (memory, processes, cpus, and the
// session's; all: CPU quotas that cannot bind, all-binding: that can), with each
// controller's alone (cpus: one that can bind), and with none (what the measurement's
// own noise is). With every kind, it also alternates the kernel's floor in the same
// loop (cgroupFloor: a raw exec inside and outside such cgroups) and reports its
// ratio, floor-limits/none, and dsh's own over it, limits/floor.
//
//	go test -run '^$' -bench BenchmarkLimitsTrue -count 3 ./plugins/bashlocal/
func BenchmarkLimitsTrue(b *testing.B) {
	for _, tc := range []struct {
		name   string
		limits bashexec.LimitsConfig
		floor  floorLimits
	}{
		{"all", allLimitsCfg, allFloor},
		{"all-binding", bindingLimitsCfg, bindingFloor},
		{"memory", bashexec.LimitsConfig{Memory: "1GiB"}, nil},
		{"processes", bashexec.LimitsConfig{Processes: num(1000)}, nil},
		{"cpus", bashexec.LimitsConfig{CPUs: num(hostCPUs - 0.5)}, nil},
		// No limit on either side: the noise of the measurement itself.
		{"none", bashexec.LimitsConfig{}, nil},
	} {
		b.Run(tc.name, func(b *testing.B) { limitsPaired(b, tc.limits, tc.floor) })
	}
}

func limitsPaired(b *testing.B, limits bashexec.LimitsConfig, floorOf floorLimits) {
	sup := subprocess.New(subprocess.Options{SpillRoot: b.TempDir()})
	b.Cleanup(sup.Close)
	plain, err := bashlocal.New(sup, &bashlocal.Config{Config: bashexec.DefaultConfig()})
	if err != nil {
		b.Fatal(err)
	}
	limited, err := bashlocal.New(sup, &bashlocal.Config{Config: bashexec.DefaultConfig(), Limits: limits})
	if err != nil {
		b.Skip(err)
	}
	b.Logf("limits: %s", sup.LimitsMechanism(limited.ResourceLimits()))
	ctx := context.Background()
	run := func(ex shell.Executor) time.Duration {
		t0 := time.Now()
		spec, _ := ex.Resolve(shell.ExecRequest{Command: "true", SessionID: "bench"})
		x, err := ex.Execute(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		if res, err := x.Result(ctx); err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
			b.Fatalf("%+v %v", res, err)
		}
		return time.Since(t0)
	}
	var floor *cgroupFloor
	if floorOf != nil {
		floor = newCgroupFloor(b, floorOf)
	}
	var with, without, floorIn, floorOut []time.Duration
	// inTurn runs first then second, in the other order every other iteration, so
	// that neither always follows the other's clean-up.
	inTurn := func(i int, first, second func()) {
		if i%2 != 0 {
			first, second = second, first
		}
		first()
		second()
	}
	for i := 0; b.Loop(); i++ {
		inTurn(i, func() { with = append(with, run(limited)) }, func() { without = append(without, run(plain)) })
		if floor != nil {
			inTurn(i, func() { floorIn = append(floorIn, floor.run(b, true)) }, func() { floorOut = append(floorOut, floor.run(b, false)) })
		}
	}
	w, wo := proctest.Median(with), proctest.Median(without)
	b.ReportMetric(float64(w.Nanoseconds()), "limits-median-ns")
	b.ReportMetric(float64(wo.Nanoseconds()), "none-median-ns")
	b.ReportMetric(float64(w)/float64(wo), "limits/none")
	if floor != nil {
		ratio := float64(proctest.Median(floorIn)) / float64(proctest.Median(floorOut))
		b.ReportMetric(ratio, "floor-limits/none")
		b.ReportMetric(float64(w)/float64(wo)/ratio, "limits/floor")
	}
}

func num(v float64) *float64 { return &v }

// allLimitsCfg sets every kind of limit, the CPU quotas at all this host's CPUs
// (which cannot bind: dsh writes none); bindingLimitsCfg the same with CPU quotas half
// a CPU below that (which can).
var (
	hostCPUs         = float64(runtime.NumCPU())
	allLimitsCfg     = bashexec.LimitsConfig{Memory: "1GiB", Processes: num(1000), CPUs: num(hostCPUs), SessionMemory: "4GiB", SessionProcesses: num(4000), SessionCPUs: num(hostCPUs)}
	bindingLimitsCfg = bashexec.LimitsConfig{Memory: "1GiB", Processes: num(1000), CPUs: num(hostCPUs - 0.5), SessionMemory: "4GiB", SessionProcesses: num(4000), SessionCPUs: num(hostCPUs - 0.5)}
)

// BenchmarkCPUQuota runs a 2-second busy loop under `cpus: 0.5` and reports the share
// of one core it got, from its CPU usage (cpu-of-a-core, near 0.5).
func BenchmarkCPUQuota(b *testing.B) {
	h := limitstest.Compose(b, limitsTarget, map[string]any{"cpus": 0.5})
	var cpu, wall int64
	for b.Loop() {
		c, w := limitstest.BusyLoop(b, h, h.Session("quota"), 2*time.Second)
		cpu, wall = cpu+c, wall+w
	}
	b.ReportMetric(float64(cpu)/float64(wall), "cpu-of-a-core")
}
