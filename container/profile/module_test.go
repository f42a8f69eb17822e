package profile_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"go.uber.org/fx"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/container/profile"
	"github.com/dsh-dev/dsh/internal/proctest"
)

// The fx lifecycle: OnStart composes the profile (official specifiers as names),
// OnStop disposes every fiber in reverse activation order; with Watch, edits reload.
func TestModuleLifecycle(t *testing.T) {
	j := &journal{}
	dir := t.TempDir()
	path := filepath.Join(dir, "harness.yaml")
	writeFile(t, path, `
extends: base
plugins:
  - id: tool
    name: tool
    config: {value: one}
`)
	builtins := fstest.MapFS{"base.yaml": {Data: []byte(`
plugins:
  - id: bash
    name: "@test/local"
  - id: side
    name: side
`)}}
	values := &journal{}
	var rt *container.Runtime
	app := fx.New(
		profile.Module,
		fx.Supply(profile.ModuleOptions{Profile: path, Builtins: builtins, Watch: true, Debounce: 10 * time.Millisecond, Logger: quiet}),
		container.ModuleOf(plug(j, "tool", []string{"shell"}, nil, func(_ *container.Activation, c *testConfig) { values.Add("%s", c.Value) })),
		container.ModuleOf(plug(j, "local", nil, []string{"shell"}, nil)),
		container.ModuleOf(plug(j, "side", nil, nil, nil)),
		fx.Populate(&rt),
	)
	mustNil(t, app.Err())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mustNil(t, app.Start(ctx))
	wantEntries(t, j.Take(), "apply bash", "apply side", "apply tool from bash")
	if st := rt.Status(); st.Profile != path || rowStatus(t, rt, "bash").Plugin != "local" {
		t.Fatalf("status %+v", st)
	}

	writeFile(t, path, `
extends: base
plugins:
  - id: tool
    name: tool
    config: {value: two}
`)
	waitFor(t, 10*time.Second, "reload", func() bool { return j.Count("apply tool from bash") == 1 })
	wantEntries(t, j.Take(), "dispose tool", "apply tool from bash")
	wantEntries(t, values.Take(), "one", "two")

	mustNil(t, app.Stop(ctx))
	wantEntries(t, j.Take(), "dispose tool", "dispose side", "dispose bash")
}

// An invalid profile fails the start, with the file, row and key.
func TestModuleStartFailsOnInvalidProfile(t *testing.T) {
	j := &journal{}
	path := filepath.Join(t.TempDir(), "bad.yaml")
	writeFile(t, path, "plugins:\n  - id: x\n    name: nope\n")
	app := fx.New(profile.Module,
		fx.Supply(profile.ModuleOptions{Profile: path, Logger: quiet}),
		container.ModuleOf(plug(j, "p", nil, nil, nil)))
	mustNil(t, app.Err())
	err := app.Start(context.Background())
	wantErrContains(t, err, path+`: row "x": module not found: nope`)
	_ = app.Stop(context.Background())
}

// Without options the module still builds an (empty) runtime.
func TestModuleWithoutOptions(t *testing.T) {
	var rt *container.Runtime
	app := fx.New(profile.Module, fx.NopLogger, fx.Populate(&rt))
	mustNil(t, app.Err())
	mustNil(t, app.Start(context.Background()))
	if len(rt.Status().Rows) != 0 {
		t.Fatal("rows without a profile")
	}
	mustNil(t, app.Stop(context.Background()))
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// OnStart honours the start deadline when an apply hangs, naming the row, and the
// runtime is disposed once the apply returns.
func TestModuleStartDeadlineWithHungApply(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	disposed := make(chan struct{})
	hung := container.Define(container.Declaration[container.NoConfig]{Name: "hung", Apply: func(a *container.Activation, _ container.NoConfig) error {
		close(entered)
		<-release
		a.Defer(func() { close(disposed) })
		return nil
	}})
	path := filepath.Join(t.TempDir(), "p.yaml")
	writeFile(t, path, "plugins:\n  - id: stuck\n    name: hung\n")
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelError}))
	app := fx.New(profile.Module, fx.Supply(profile.ModuleOptions{Profile: path, Logger: logger}), container.ModuleOf(hung))
	mustNil(t, app.Err())
	// The start deadline passes while the apply hangs.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-entered; cancel() }()
	wantErrContains(t, app.Start(ctx), "context canceled")
	waitFor(t, 10*time.Second, "the start failure logged", func() bool {
		return strings.Contains(logs.String(), `did not finish before the start deadline`) && strings.Contains(logs.String(), `still loading: \"stuck\"`)
	})
	close(release)
	select {
	case <-disposed:
	case <-time.After(10 * time.Second):
		t.Fatal("the late activation was not disposed")
	}
}

type syncBuffer = proctest.Buffer
