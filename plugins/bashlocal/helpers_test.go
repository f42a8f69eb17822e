package bashlocal_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
	bashlocal "github.com/dsh-dev/dsh/plugins/bashlocal"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/shell"
)

func TestMain(m *testing.M) { proctest.Main(m) }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newRuntime(t testing.TB) *container.Runtime {
	t.Helper()
	cat, err := container.NewCatalog(subprocess.Plugin, bashlocal.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{Logger: quietLogger()})
	t.Cleanup(rt.Close)
	return rt
}

func rows(subConfig, bashConfig map[string]any) []container.Row {
	return []container.Row{
		{ID: "subprocess", Plugin: "subprocess", Config: subConfig},
		{ID: "bash", Plugin: "bash-local", Config: bashConfig},
	}
}

// compose mounts subprocess + bash-local and returns the runtime and the executor. The
// spill root is a per-test temp dir unless subConfig sets one.
func compose(t testing.TB, subConfig, bashConfig map[string]any) (*container.Runtime, shell.Executor) {
	t.Helper()
	rt := newRuntime(t)
	sc := map[string]any{"spillRoot": t.TempDir()}
	for k, v := range subConfig {
		sc[k] = v
	}
	if err := rt.Compose("test", rows(sc, bashConfig)); err != nil {
		t.Fatal(err)
	}
	return rt, executor(t, rt)
}

func executor(t testing.TB, rt *container.Runtime) shell.Executor {
	t.Helper()
	ex, ok := container.Lookup(rt, shell.Service)
	if !ok {
		t.Fatalf("no shell service; status %+v", rt.Status())
	}
	return ex
}

func start(t testing.TB, ex shell.Executor, req shell.ExecRequest) shell.Execution {
	t.Helper()
	return startCtx(t, context.Background(), ex, req)
}

func startCtx(t testing.TB, ctx context.Context, ex shell.Executor, req shell.ExecRequest) shell.Execution {
	t.Helper()
	spec, err := ex.Resolve(req)
	if err != nil {
		t.Fatalf("Resolve(%q): %v", req.Command, err)
	}
	x, err := ex.Execute(ctx, spec)
	if err != nil {
		t.Fatalf("Execute(%q): %v", req.Command, err)
	}
	return x
}

// run is one foreground call: Resolve, Execute, Result.
func run(t testing.TB, ex shell.Executor, req shell.ExecRequest) shell.RunResult {
	t.Helper()
	x := start(t, ex, req)
	res, err := x.Result(context.Background())
	if err != nil {
		t.Fatalf("Result(%q): %v", req.Command, err)
	}
	return res
}

func ms(v float64) *float64 { return &v }

func exitCode(r shell.RunResult) string {
	if r.ExitCode == nil {
		return "nil"
	}
	return strconv.Itoa(*r.ExitCode)
}

// readUntil accumulates consuming reads until the collected delta contains want.
func readUntil(t testing.TB, x shell.Execution, want string) string {
	t.Helper()
	var got strings.Builder
	proctest.WaitFor(t, 10*time.Second, "output "+want, func() bool {
		got.WriteString(x.ReadOutput().Delta)
		return strings.Contains(got.String(), want)
	})
	return got.String()
}

func waitDone(t testing.TB, x shell.Execution, d time.Duration) {
	t.Helper()
	select {
	case <-x.Done():
	case <-time.After(d):
		t.Fatalf("execution %d not done after %v", x.Pid(), d)
	}
}

// trapScript sets a TERM trap running action, says "ready", then loops until killed.
func trapScript(action string) string {
	return `trap '` + action + `' TERM; echo ready; while :; do sleep 0.05; done`
}

// trapTimeouts calls attempt with growing timeouts until one is conclusive. What a TERM
// trap does on timeout shows only if the timeout fires after bash set its trap; on a
// loaded machine bash may start too late for a short one. Such a run (its output lacks
// the "ready" a trapScript prints once the trap is set: the SIGTERM killed bash before)
// says nothing about the trap, and attempt reports false.
func trapTimeouts(t *testing.T, attempt func(timeoutMs float64) bool) {
	t.Helper()
	for _, ms := range []float64{100, 1000, 5000} {
		if attempt(ms) {
			return
		}
		t.Logf("the %vms timeout fired before bash set its trap; retrying with a longer one", ms)
	}
	t.Fatal("bash never set its trap before the timeout")
}
