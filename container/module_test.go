package container_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"go.uber.org/fx"

	"github.com/dsh-dev/dsh/container"
)

// Item 1: plugin declarations arrive through fx (one module per plugin package), the
// catalog is sorted by name whatever the declaration order, and official specifiers
// work as aliases.
func TestCatalogFromFx(t *testing.T) {
	j := &journal{}
	var cat *container.Catalog
	app := fx.New(
		container.Module,
		fx.Supply(container.ModuleOptions{Logger: quiet}),
		container.Declare(plug(j, "zeta", nil, nil, nil)),
		container.Declare(container.Define(container.Declaration[container.NoConfig]{Name: "bash-local", Aliases: []string{"@deepseek-ai/dsh-bash-local"}, Provide: keys("shell"),
			Apply: func(a *container.Activation, _ container.NoConfig) error { return key("shell").Provide(a, &svc{}) }})),
		container.Declare(plug(j, "alpha", nil, nil, nil)),
		fx.Populate(&cat),
	)
	mustNil(t, app.Err())
	var names []string
	for _, p := range cat.Plugins() {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"alpha", "bash-local", "zeta"}) {
		t.Fatalf("catalog order %q", names)
	}
	p, ok := cat.Lookup("@deepseek-ai/dsh-bash-local")
	if !ok || p.Name != "bash-local" {
		t.Fatalf("alias lookup: %v %q", ok, p.Name)
	}
	if got := cat.Providers("shell"); !slices.Equal(got, []string{"bash-local"}) {
		t.Fatalf("providers %q", got)
	}
}

// Item 1: a duplicate plugin name or alias fails fx.New.
func TestDuplicateDeclarationFailsFxNew(t *testing.T) {
	j := &journal{}
	a := plug(j, "a", nil, nil, nil)
	for name, second := range map[string]container.Plugin{
		"name":          plug(j, "a", nil, nil, nil),
		"alias":         plugAs(a, "b", "@test/a"),
		"alias as name": plugAs(a, "@test/a"),
	} {
		t.Run(name, func(t *testing.T) {
			app := fx.New(container.Module, fx.Supply(container.ModuleOptions{Logger: quiet}),
				container.Declare(a), container.Declare(second))
			wantErrContains(t, app.Err(), "catalog: name", "is declared by both")
		})
	}
}

// plugAs is p under another name and aliases.
func plugAs(p container.Plugin, name string, aliases ...string) container.Plugin {
	p.Name, p.Aliases = name, aliases
	return p
}

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
		container.Module,
		fx.Supply(container.ModuleOptions{Profile: path, Builtins: builtins, Watch: true, Debounce: 10 * time.Millisecond, Logger: quiet}),
		container.Declare(plug(j, "tool", []string{"shell"}, nil, func(_ *container.Activation, c *testConfig) { values.add("%s", c.Value) })),
		container.Declare(plug(j, "local", nil, []string{"shell"}, nil)),
		container.Declare(plug(j, "side", nil, nil, nil)),
		fx.Populate(&rt),
	)
	mustNil(t, app.Err())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mustNil(t, app.Start(ctx))
	wantEntries(t, j.take(), "apply bash", "apply side", "apply tool from bash")
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
	waitFor(t, 10*time.Second, "reload", func() bool { return j.count("apply tool from bash") == 1 })
	wantEntries(t, j.take(), "dispose tool", "apply tool from bash")
	wantEntries(t, values.take(), "one", "two")

	mustNil(t, app.Stop(ctx))
	wantEntries(t, j.take(), "dispose tool", "dispose side", "dispose bash")
}

// An invalid profile fails the start, with the file, row and key.
func TestModuleStartFailsOnInvalidProfile(t *testing.T) {
	j := &journal{}
	path := filepath.Join(t.TempDir(), "bad.yaml")
	writeFile(t, path, "plugins:\n  - id: x\n    name: nope\n")
	app := fx.New(container.Module,
		fx.Supply(container.ModuleOptions{Profile: path, Logger: quiet}),
		container.Declare(plug(j, "p", nil, nil, nil)))
	mustNil(t, app.Err())
	err := app.Start(context.Background())
	wantErrContains(t, err, path+`: row "x": module not found: nope`)
	_ = app.Stop(context.Background())
}

// Without options the module still builds an (empty) runtime.
func TestModuleWithoutOptions(t *testing.T) {
	var rt *container.Runtime
	app := fx.New(container.Module, fx.NopLogger, fx.Populate(&rt))
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
	app := fx.New(container.Module, fx.Supply(container.ModuleOptions{Profile: path, Logger: logger}), container.Declare(hung))
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

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
