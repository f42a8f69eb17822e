package bashsandbox_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	bashsandbox "github.com/dsh-dev/dsh/plugins/bash-sandbox"
	"github.com/dsh-dev/dsh/plugins/shell"
	"github.com/dsh-dev/dsh/plugins/shell/bashexec"
	"github.com/dsh-dev/dsh/plugins/subprocess"
)

// BenchmarkLauncherStartup measures the launcher's own start-up cost in one run: the
// floors `true` and `bash -c true` started directly; the launcher failing at once
// (start-up alone: the process up to the dispatch, then exit 125); and `true` and
// `bash -c true` through the launcher (start-up + Landlock + exec) under read-only and
// workspace-write with the network denied, and read-only with it allowed.
func BenchmarkLauncherStartup(b *testing.B) {
	ws, _ := os.MkdirTemp("", "dsh-sandbox-bench-")
	defer os.RemoveAll(ws)
	direct := []string{"bash", "-c", "true"}
	run := func(b *testing.B, argv []string, wantExit int) {
		b.ReportAllocs()
		for b.Loop() {
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = testEnv()
			err := cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != wantExit {
				b.Fatalf("exit %d, want %d: %v", code, wantExit, err)
			}
		}
	}
	b.Run("true-direct", func(b *testing.B) { run(b, []string{"true"}, 0) })
	exe, _ := os.Executable()
	b.Run("launcher-startup-only", func(b *testing.B) { run(b, []string{exe, bashsandbox.LauncherArg}, bashsandbox.RunnerFailureExitCode) })
	ro := bashsandbox.LaunchPolicy{Mode: shell.ModeReadOnly, Network: bashsandbox.NetworkDeny}
	launchedTrue, err := bashsandbox.LauncherArgv(ro, []string{"true"})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("launcher-read-only-net-deny-true", func(b *testing.B) { run(b, launchedTrue, 0) })
	b.Run("bash-direct", func(b *testing.B) { run(b, direct, 0) })
	for _, p := range []bashsandbox.LaunchPolicy{
		ro,
		{Mode: shell.ModeWorkspaceWrite, WorkspaceRoot: ws, WritableRoots: bashsandbox.TempDirs(), Network: bashsandbox.NetworkDeny},
		{Mode: shell.ModeReadOnly, Network: bashsandbox.NetworkAllow},
	} {
		argv, err := bashsandbox.LauncherArgv(p, direct)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("launcher-"+p.Mode+"-net-"+p.Network, func(b *testing.B) { run(b, argv, 0) })
	}
}

// BenchmarkExecutorTrue is issue 5 item 11: `true` through the same executor path
// (Resolve, Execute, Result over one subprocess Supervisor) locally — exactly what
// bash-local runs — and confined by bash-sandbox in each mode, in the same run. The
// ratio-* benchmarks alternate a local and a sandboxed call in every iteration and
// report both means and sandboxed/local (target ≤ 2.0).
func BenchmarkExecutorTrue(b *testing.B) {
	sup := subprocess.New(subprocess.Options{Logger: quietLogger()})
	defer sup.Close()
	ws, _ := os.MkdirTemp("", "dsh-sandbox-bench-")
	defer os.RemoveAll(ws)
	local, err := bashexec.New(bashexec.Local(sup), bashexec.Config{Cwd: ws, TimeoutMs: 120000, MaxTimeoutMs: 600000,
		MaxOutputBytes: 64000, MaxSpillBytes: 67108864, GraceMs: 3000}, bashexec.Options{Name: "bash-local"})
	if err != nil {
		b.Fatal(err)
	}
	sandboxed := map[string]shell.Executor{}
	modes := []string{shell.ModeReadOnly, shell.ModeWorkspaceWrite, shell.ModeDangerFullAccess}
	for _, mode := range modes {
		cfg := bashsandbox.DefaultConfig()
		cfg.Cwd, cfg.DefaultMode = ws, mode
		ex, _, err := bashsandbox.New(sup, cfg, quietLogger())
		if err != nil {
			b.Fatal(err)
		}
		sandboxed[mode] = ex
	}
	ctx := context.Background()
	once := func(b *testing.B, ex shell.Executor) {
		spec, err := ex.Resolve(shell.ExecRequest{Command: "true"})
		if err != nil {
			b.Fatal(err)
		}
		e, err := ex.Execute(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		r, err := e.Result(ctx)
		if err != nil || r.ExitCode == nil || *r.ExitCode != 0 {
			b.Fatalf("true: %+v, %v", r, err)
		}
	}
	run := func(ex shell.Executor) func(b *testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				once(b, ex)
			}
		}
	}
	b.Run("local", run(local))
	for _, mode := range modes {
		b.Run("sandbox-"+mode, run(sandboxed[mode]))
	}
	for _, mode := range modes {
		b.Run("ratio-"+mode, func(b *testing.B) {
			var tl, ts time.Duration
			n := 0
			for b.Loop() {
				t0 := time.Now()
				once(b, local)
				t1 := time.Now()
				once(b, sandboxed[mode])
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
