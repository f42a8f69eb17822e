package bashlocal_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
	bashlocal "github.com/dsh-dev/dsh/plugins/bashlocal"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
	"github.com/dsh-dev/dsh/shell"
)

func TestDeclaration(t *testing.T) {
	p := bashlocal.Plugin
	if p.Name != "bash-local" || !slices.Equal(p.Aliases, []string{"@deepseek-ai/dsh-bash-local"}) ||
		!slices.Equal(p.Inject, container.Keys{subprocess.Service}) || !slices.Equal(p.Provide, container.Keys{shell.Service}) {
		t.Errorf("declaration %+v", p)
	}
	cfg, ok := p.Config().(*bashlocal.Config)
	if !ok {
		t.Fatalf("Config() is %T", p.Config())
	}
	if cfg.Cwd != "" || cfg.TimeoutMs != 120000 || cfg.MaxTimeoutMs != 600000 || cfg.MaxOutputBytes != 64000 ||
		cfg.MaxSpillBytes != 67108864 || cfg.GraceMs != 3000 {
		t.Errorf("defaults %+v", cfg.Config)
	}
	// Pending until subprocess exists; the alias mounts the same plugin.
	cat, _ := container.NewCatalog(subprocess.Plugin, bashlocal.Plugin)
	rt := container.NewRuntime(cat, container.Options{Logger: quietLogger()})
	defer rt.Close()
	if err := rt.Compose("test", []container.Row{{ID: "bash", Plugin: "@deepseek-ai/dsh-bash-local"}}); err != nil {
		t.Fatal(err)
	}
	if row := rt.Status().Rows[0]; row.State != container.StatePending || !slices.Equal(row.Missing, []string{"subprocess"}) {
		t.Errorf("without subprocess: %+v", row)
	}
	if err := rt.Mount(container.Row{ID: "subprocess", Plugin: "subprocess"}); err != nil {
		t.Fatal(err)
	}
	if row := rt.Status().Rows[0]; row.State != container.StateActive {
		t.Errorf("with subprocess: %+v", row)
	}
	if ex := executor(t, rt); ex.SandboxMode() != "" {
		t.Errorf("SandboxMode() = %q, want empty for a non-confining executor", ex.SandboxMode())
	}
}

func TestConfigValidationMessages(t *testing.T) {
	rt := newRuntime(t)
	try := func(config map[string]any) error {
		err := rt.Validate(rows(nil, config))
		var re *container.RowError
		if errors.As(err, &re) {
			return re.Err
		}
		return err
	}
	for _, key := range []string{"timeoutMs", "maxTimeoutMs", "maxOutputBytes", "maxSpillBytes", "graceMs"} {
		for _, bad := range []any{0, -1, -0.5, math.NaN(), math.Inf(1), math.Inf(-1)} {
			err := try(map[string]any{key: bad})
			want := "bash-local: " + key + " must be a positive finite number"
			if err == nil || err.Error() != want {
				t.Errorf("%s: %v → %v, want %q", key, bad, err, want)
			}
		}
	}
	if err := try(map[string]any{"graceMs": 2147483648}); err == nil || err.Error() != "bash-local: graceMs must be no greater than 2147483647" {
		t.Errorf("graceMs too large: %v", err)
	}
	if err := try(map[string]any{"graceMs": 2147483647, "timeoutMs": 1, "maxTimeoutMs": 1, "maxOutputBytes": 1, "maxSpillBytes": 1, "cwd": "/tmp"}); err != nil {
		t.Errorf("valid config rejected: %v", err)
	}
	if err := try(map[string]any{"timeoutms": 5}); err == nil || !strings.Contains(err.Error(), `unknown key "timeoutms"`) {
		t.Errorf("unknown key: %v", err)
	}
}

// Every config key takes effect, and Resolve applies defaults and caps.
func TestConfigReachesResolve(t *testing.T) {
	proctest.NoLeftovers(t)
	cwd := t.TempDir()
	_, ex := compose(t, nil, map[string]any{"cwd": cwd, "timeoutMs": 5000, "maxTimeoutMs": 8000, "maxOutputBytes": 100, "maxSpillBytes": 1000, "graceMs": 250})
	spec, err := ex.Resolve(shell.ExecRequest{Command: "pwd"})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Workdir != cwd || spec.TimeoutMs != 5000 || spec.StdoutMaxBytes != 100 || spec.Expiry != shell.ExpiryKill {
		t.Errorf("spec %+v", spec)
	}
	if spec, _ := ex.Resolve(shell.ExecRequest{Command: "pwd", TimeoutMs: ms(1e9)}); spec.TimeoutMs != 8000 {
		t.Errorf("clamp: %d", spec.TimeoutMs)
	}
	if spec, _ := ex.Resolve(shell.ExecRequest{Command: "pwd", Workdir: "sub"}); spec.Workdir != filepath.Join(cwd, "sub") {
		t.Errorf("relative workdir: %s", spec.Workdir)
	}
	for _, bad := range []float64{math.NaN(), 0, -1} {
		_, err := ex.Resolve(shell.ExecRequest{Command: "pwd", TimeoutMs: ms(bad)})
		if err == nil || !strings.Contains(err.Error(), "request.timeoutMs") {
			t.Errorf("timeoutMs %v: %v", bad, err)
		}
	}
	res := run(t, ex, shell.ExecRequest{Command: "pwd; seq 1 500"})
	if !strings.HasSuffix(res.Stdout.Text, "\n500\n") || len(res.Stdout.Text) != 100 || !res.Stdout.Truncated || res.Stdout.SpillPath != "" {
		t.Errorf("maxOutputBytes 100 / maxSpillBytes 1000: %+v", res.Stdout)
	}
	res = run(t, ex, shell.ExecRequest{Command: "pwd"})
	if res.Stdout.Text != cwd+"\n" || res.TimeoutMs != 5000 {
		t.Errorf("cwd: %+v", res)
	}
	// graceMs 250, not the default 3000, separates the SIGTERM from the SIGKILL.
	trapTimeouts(t, func(timeoutMs float64) bool {
		start := time.Now()
		res := run(t, ex, shell.ExecRequest{Command: trapScript("echo term"), TimeoutMs: ms(timeoutMs)})
		took := time.Since(start)
		if !strings.HasPrefix(res.Stdout.Text, "ready\n") {
			return false
		}
		limit := time.Duration(timeoutMs+250+2000) * time.Millisecond
		if res.Signal != "SIGKILL" || !res.TimedOut || res.Stdout.Text != "ready\nterm\n" || took > limit {
			t.Errorf("graceMs 250: %+v after %v (limit %v)", res, took, limit)
		}
		return true
	})
}

// The rendering table of the bash tool, as the typed result the renderer works from.
func TestForegroundResults(t *testing.T) {
	proctest.NoLeftovers(t)
	_, ex := compose(t, nil, nil)
	for _, c := range []struct {
		cmd, stdout, stderr string
		code                string
	}{
		{"echo hello", "hello\n", "", "0"},
		{"true", "", "", "0"},
		{"echo out; echo err >&2", "out\n", "err\n", "0"},
		{"echo failing; exit 3", "failing\n", "", "3"},
	} {
		res := run(t, ex, shell.ExecRequest{Command: c.cmd})
		if res.Stdout.Text != c.stdout || res.Stderr.Text != c.stderr || exitCode(res) != c.code || res.Signal != "" ||
			res.TimedOut || res.Aborted || res.TimeoutMs != 120000 || res.Stdout.Truncated || res.Stderr.Truncated ||
			res.Stdout.SpillPath != "" || res.Stderr.SpillPath != "" || res.Sandbox != nil {
			t.Errorf("%q: %+v", c.cmd, res)
		}
	}
	res := run(t, ex, shell.ExecRequest{Command: "sleep 60", TimeoutMs: ms(100)})
	if res.ExitCode != nil || res.Signal != "SIGTERM" || !res.TimedOut || res.Aborted || res.TimeoutMs != 100 || res.Stdout.Text != "" {
		t.Errorf("timeout: %+v", res)
	}
}

func TestTimeoutAbortAndSelfKillFlags(t *testing.T) {
	proctest.NoLeftovers(t)
	_, ex := compose(t, nil, map[string]any{"graceMs": 500})

	t.Run("timeout", func(t *testing.T) {
		res := run(t, ex, shell.ExecRequest{Command: "sleep 60", TimeoutMs: ms(150)})
		if !res.TimedOut || res.Aborted || res.Signal != "SIGTERM" || res.ExitCode != nil || res.TimeoutMs != 150 {
			t.Errorf("%+v", res)
		}
	})
	t.Run("abort", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		x := startCtx(t, ctx, ex, shell.ExecRequest{Command: "echo ready; sleep 60"})
		readUntil(t, x, "ready")
		cancel()
		res, err := x.Result(context.Background())
		if err != nil || res.TimedOut || !res.Aborted || res.Signal != "SIGTERM" || res.ExitCode != nil || res.Stdout.Text != "ready\n" {
			t.Errorf("%+v %v", res, err)
		}
	})
	t.Run("caller deadline before the timeout is an abort", func(t *testing.T) {
		// The caller's deadline must pass after the spawn; if it passed before Execute
		// checked it (a starved machine), Execute rightly refuses, and a later one is tried.
		spec, _ := ex.Resolve(shell.ExecRequest{Command: "sleep 60", TimeoutMs: ms(60000)})
		for _, d := range []time.Duration{150 * time.Millisecond, time.Second, 5 * time.Second} {
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			x, err := ex.Execute(ctx, spec)
			if err != nil {
				if err.Error() != "bash-local: aborted before spawn: context deadline exceeded" {
					t.Fatalf("Execute: %v", err)
				}
				t.Logf("the %v deadline passed before the spawn; retrying with a later one", d)
				continue
			}
			res, err := x.Result(context.Background())
			if err != nil || res.TimedOut || !res.Aborted || res.TimeoutMs != 60000 {
				t.Errorf("%+v %v", res, err)
			}
			return
		}
		t.Fatal("every caller deadline passed before the spawn")
	})
	t.Run("timeout first, then abort", func(t *testing.T) {
		trapTimeouts(t, func(timeoutMs float64) bool {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			x := startCtx(t, ctx, ex, shell.ExecRequest{Command: trapScript("echo term"), TimeoutMs: ms(timeoutMs)})
			var out strings.Builder
			proctest.WaitFor(t, 20*time.Second, "the trap to run, or the end", func() bool {
				out.WriteString(x.ReadOutput().Delta)
				return strings.Contains(out.String(), "term") || proctest.ExitState(x) != proc.Running
			})
			if !strings.Contains(out.String(), "term") {
				waitDone(t, x, 10*time.Second)
				out.WriteString(x.ReadOutput().Delta)
				if strings.Contains(out.String(), "ready") {
					t.Fatalf("the trap was set but never ran: %+v", proctest.ExitState(x))
				}
				return false
			}
			cancel()
			res, err := x.Result(context.Background())
			if err != nil || !res.TimedOut || res.Aborted || res.Signal != "SIGKILL" {
				t.Errorf("%+v %v", res, err)
			}
			return true
		})
	})
	t.Run("self kill", func(t *testing.T) {
		res := run(t, ex, shell.ExecRequest{Command: "kill -TERM $$"})
		if res.TimedOut || res.Aborted || res.Signal != "SIGTERM" || res.ExitCode != nil {
			t.Errorf("%+v", res)
		}
	})
	t.Run("trapper exits zero on timeout", func(t *testing.T) {
		trapTimeouts(t, func(timeoutMs float64) bool {
			res := run(t, ex, shell.ExecRequest{Command: trapScript("exit 0"), TimeoutMs: ms(timeoutMs)})
			if res.Stdout.Text != "ready\n" {
				return false
			}
			if !res.TimedOut || res.Signal != "" || exitCode(res) != "0" {
				t.Errorf("%+v", res)
			}
			return true
		})
	})
	t.Run("background has no timeout", func(t *testing.T) {
		_, short := compose(t, nil, map[string]any{"timeoutMs": 50, "maxTimeoutMs": 50})
		x := start(t, short, shell.ExecRequest{Command: "sleep 0.4; echo survived", Expiry: shell.ExpiryNone})
		res, err := x.Result(context.Background())
		if err != nil || res.TimedOut || res.TimeoutMs != 0 || res.Stdout.Text != "survived\n" || exitCode(res) != "0" {
			t.Errorf("%+v %v", res, err)
		}
	})
	t.Run("already cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		spec, _ := ex.Resolve(shell.ExecRequest{Command: "touch " + filepath.Join(t.TempDir(), "x")})
		x, err := ex.Execute(ctx, spec)
		if err == nil || x != nil || err.Error() != "bash-local: aborted before spawn: context canceled" {
			t.Errorf("Execute with a cancelled ctx: %v %v", x, err)
		}
	})
	t.Run("Result ctx bounds the wait only", func(t *testing.T) {
		x := start(t, ex, shell.ExecRequest{Command: "echo ready; sleep 60", Expiry: shell.ExpiryNone})
		readUntil(t, x, "ready")
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, err := x.Result(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Result with an expired ctx: %v", err)
		}
		if st, ok := x.Exit(); ok {
			t.Errorf("status %+v after the wait gave up", st)
		}
		x.Kill()
		waitDone(t, x, 10*time.Second)
	})
}

func TestNonexistentWorkdir(t *testing.T) {
	proctest.NoLeftovers(t)
	_, ex := compose(t, nil, nil)
	missing := filepath.Join(t.TempDir(), "missing")
	const errno = "ENOENT (no such file or directory)"
	want := "spawn failed: chdir " + missing + ": " + errno

	t.Run("foreground", func(t *testing.T) {
		spec, _ := ex.Resolve(shell.ExecRequest{Command: "echo hi", Workdir: missing})
		x, err := ex.Execute(context.Background(), spec)
		if err != nil {
			t.Fatalf("Execute: %v", err)
		}
		_, err = x.Result(context.Background())
		if err == nil || !strings.Contains(err.Error(), "ENOENT") || err.Error() != "bash-local: "+want {
			t.Errorf("Result error %v", err)
		}
	})
	t.Run("background", func(t *testing.T) {
		x := start(t, ex, shell.ExecRequest{Command: "echo hi", Workdir: missing, Expiry: shell.ExpiryNone})
		waitDone(t, x, time.Second)
		if st, ok := x.Exit(); !ok || st.State() != proc.Killed || st.Code != nil || st.Signal != "" {
			t.Errorf("status %+v", st)
		}
		if r := x.ReadOutput(); r.Delta != "[stderr]\n"+want+"\n" || r.Lossy {
			t.Errorf("read %+v", r)
		}
		if r := x.ReadOutput(); r.Delta != "" {
			t.Errorf("second read %+v", r)
		}
		if _, err := x.Result(context.Background()); err == nil || err.Error() != "bash-local: "+want {
			t.Errorf("Result error %v", err)
		}
		if x.Kill() || x.Pid() != 0 {
			t.Error("a handle that never started reports a kill or a pid")
		}
	})
}

func TestConsumingReads(t *testing.T) {
	proctest.NoLeftovers(t)
	_, ex := compose(t, nil, nil)
	gate := filepath.Join(t.TempDir(), "gate")
	x := start(t, ex, shell.ExecRequest{Command: `echo first; while [ ! -e ` + gate + ` ]; do sleep 0.01; done; echo second`, Expiry: shell.ExpiryNone})
	if x.Pid() <= 0 || proctest.ExitState(x) != proc.Running {
		t.Errorf("pid %d status %+v", x.Pid(), proctest.ExitState(x))
	}
	if got := readUntil(t, x, "first\n"); got != "first\n" {
		t.Errorf("first read %q", got)
	}
	os.WriteFile(gate, nil, 0o600)
	waitDone(t, x, 10*time.Second)
	if r := x.ReadOutput(); r.Delta != "second\n" || r.Lossy || r.StdoutSpillPath != "" || r.StderrSpillPath != "" {
		t.Errorf("second read %+v", r)
	}
	if r := x.ReadOutput(); r != (shell.ProcessRead{}) {
		t.Errorf("third read %+v", r)
	}
	if st, ok := x.Exit(); !ok || st.State() != proc.Completed || st.Code == nil || *st.Code != 0 {
		t.Errorf("status %+v", st)
	}

	t.Run("stderr marking", func(t *testing.T) {
		for cmd, want := range map[string]string{
			"echo out; echo err >&2":     "out\n[stderr]\nerr\n",
			"printf out; printf err >&2": "out\n[stderr]\nerr",
			"echo err >&2":               "[stderr]\nerr\n",
		} {
			x := start(t, ex, shell.ExecRequest{Command: cmd, Expiry: shell.ExpiryNone})
			waitDone(t, x, 10*time.Second)
			if r := x.ReadOutput(); r.Delta != want {
				t.Errorf("%q: delta %q want %q", cmd, r.Delta, want)
			}
			if r := x.ReadOutput(); r.Delta != "" {
				t.Errorf("%q: second delta %q", cmd, r.Delta)
			}
		}
	})
	t.Run("lossy", func(t *testing.T) {
		n := int64(10)
		x := start(t, ex, shell.ExecRequest{Command: "seq 1 1000; echo e >&2", StdoutMaxBytes: &n, Expiry: shell.ExpiryNone})
		waitDone(t, x, 10*time.Second)
		r := x.ReadOutput()
		if r.Delta != "\n999\n1000\n[stderr]\ne\n" { // the last 10 bytes of stdout
			t.Errorf("delta %q", r.Delta)
		}
		if !r.Lossy || r.StdoutSpillPath == "" || r.StderrSpillPath != "" {
			t.Errorf("read %+v", r)
		}
		data, _ := os.ReadFile(r.StdoutSpillPath)
		if !strings.HasPrefix(string(data), "1\n2\n3\n") || !strings.HasSuffix(string(data), "\n1000\n") {
			t.Errorf("spill file %d bytes", len(data))
		}
		if r := x.ReadOutput(); r.Delta != "" || r.Lossy {
			t.Errorf("second read %+v", r)
		}
	})
}

func TestKillAndGrace(t *testing.T) {
	proctest.NoLeftovers(t)
	_, ex := compose(t, nil, map[string]any{"graceMs": 500})
	x := start(t, ex, shell.ExecRequest{Command: "echo ready; sleep 60", Expiry: shell.ExpiryNone})
	readUntil(t, x, "ready")
	if !x.Kill() {
		t.Fatal("Kill() = false while running")
	}
	waitDone(t, x, 10*time.Second)
	if x.Kill() {
		t.Error("Kill() = true after the command finished")
	}
	if st, ok := x.Exit(); !ok || st.State() != proc.Killed || st.Signal != "SIGTERM" || st.Code != nil {
		t.Errorf("status %+v", st)
	}
	res, err := x.Result(context.Background())
	if err != nil || res.Signal != "SIGTERM" || res.TimedOut || res.Aborted || res.ExitCode != nil || res.TimeoutMs != 0 {
		t.Errorf("result %+v %v", res, err)
	}
	if !proctest.Gone(x.Pid()) {
		t.Errorf("pid %d alive", x.Pid())
	}

	trapper := start(t, ex, shell.ExecRequest{Command: `trap 'echo got-term' TERM; echo ready; while :; do sleep 0.05; done`, Expiry: shell.ExpiryNone})
	readUntil(t, trapper, "ready")
	killed := time.Now()
	trapper.Kill()
	waitDone(t, trapper, 10*time.Second)
	res, _ = trapper.Result(context.Background())
	if res.Signal != "SIGKILL" || !strings.Contains(res.Stdout.Text, "got-term") || time.Since(killed) < 450*time.Millisecond {
		t.Errorf("TERM trapper: %+v after %v", res, time.Since(killed))
	}
	if st, ok := trapper.Exit(); !ok || st.State() != proc.Killed || st.Signal != "SIGKILL" {
		t.Errorf("status %+v", st)
	}
}

// Resolve carries stdin/env/dshEnv only when given, and Execute uses them.
func TestStdinEnvAndDshEnvReachTheCommand(t *testing.T) {
	proctest.NoLeftovers(t)
	_, ex := compose(t, nil, nil)
	stdin := "line one\nline two\n"
	res := run(t, ex, shell.ExecRequest{
		Command: `cat; echo "$GREETING $DSH_SESSION_ID"`,
		Stdin:   &stdin,
		Env:     map[string]string{"GREETING": "hi"},
		DshEnv:  map[string]string{"DSH_SESSION_ID": "s-1"},
	})
	if res.Stdout.Text != "line one\nline two\nhi s-1\n" {
		t.Errorf("stdout %q", res.Stdout.Text)
	}
	spec, _ := ex.Resolve(shell.ExecRequest{Command: "cat"})
	if spec.Stdin != nil || spec.Env != nil || spec.DshEnv != nil {
		t.Errorf("absent fields carried: %+v", spec)
	}
}

// A value of the wrong type keeps the key's own message and says what it got.
func TestWronglyTypedNumberReadsLikeABadNumber(t *testing.T) {
	cat, err := container.NewCatalog(bashlocal.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{})
	defer rt.Close()
	for _, key := range []string{"timeoutMs", "maxTimeoutMs", "maxOutputBytes", "maxSpillBytes", "graceMs"} {
		err := rt.Validate([]container.Row{{ID: "bash", Plugin: "bash-local", Config: map[string]any{key: "5000"}}})
		want := `row "bash": bash-local: ` + key + ` must be a positive finite number, got the string "5000"`
		if err == nil || err.Error() != want {
			t.Errorf("%s: %q: got %v, want %q", key, "5000", err, want)
		}
	}
	err = rt.Validate([]container.Row{{ID: "bash", Plugin: "bash-local", Config: map[string]any{"timeoutMs": []any{1}}}})
	if want := `row "bash": bash-local: timeoutMs must be a positive finite number, got a list`; err == nil || err.Error() != want {
		t.Errorf("list: got %v, want %q", err, want)
	}
}

// A default timeout above the cap would be clamped on every call: refused.
func TestDefaultTimeoutAboveItsCap(t *testing.T) {
	cat, err := container.NewCatalog(bashlocal.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{})
	defer rt.Close()
	err = rt.Validate([]container.Row{{ID: "bash", Plugin: "bash-local", Config: map[string]any{"timeoutMs": 700000}}})
	if want := `row "bash": bash-local: timeoutMs (700000) must be no greater than maxTimeoutMs (600000)`; err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
	if err := rt.Validate([]container.Row{{ID: "bash", Plugin: "bash-local", Config: map[string]any{"timeoutMs": 700000, "maxTimeoutMs": 700000}}}); err != nil {
		t.Errorf("raising both: %v", err)
	}
}
