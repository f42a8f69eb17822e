package shellenv_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// scope is a minimal container.Scope for registry tests.
type scope struct {
	ctx    context.Context
	cancel context.CancelFunc
	defers []func()
}

func newScope() *scope {
	ctx, cancel := context.WithCancel(context.Background())
	return &scope{ctx: ctx, cancel: cancel}
}

func (s *scope) Defer(fn func())          { s.defers = append(s.defers, fn) }
func (s *scope) Context() context.Context { return s.ctx }
func (s *scope) end() {
	s.cancel()
	for i := len(s.defers) - 1; i >= 0; i-- {
		s.defers[i]()
	}
	s.defers = nil
}

func static(vars map[string]string) func(context.Context, shellenv.Call) (map[string]string, error) {
	return func(context.Context, shellenv.Call) (map[string]string, error) { return vars, nil }
}

func TestBuiltins(t *testing.T) {
	r := shellenv.NewRegistry("/home/u/.dsh")
	snap, err := r.Collect(context.Background(), shellenv.Call{Session: &container.Session{ID: "s-1"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"DSH_HOME=/home/u/.dsh", "DSH_SESSION_ID=s-1", "DSH_SHELL=1"}
	if got := snap.Env(); !reflect.DeepEqual(got, want) {
		t.Fatalf("env = %q, want %q", got, want)
	}
	// No session: no DSH_SESSION_ID.
	snap, err = r.Collect(context.Background(), shellenv.Call{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := snap.Get("DSH_SESSION_ID"); ok {
		t.Fatal("DSH_SESSION_ID present without a session")
	}
	if got := snap.Keys(); !reflect.DeepEqual(got, []string{"DSH_HOME", "DSH_SHELL"}) {
		t.Fatalf("keys = %q", got)
	}
	if len(r.List()) != 0 {
		t.Fatalf("List() = %q, want no contributor keys", r.List())
	}
}

func TestContributorErrorsExact(t *testing.T) {
	r := shellenv.NewRegistry("/h")
	sc := newScope()
	defer sc.end()
	ok := static(nil)
	if err := r.Register(sc, shellenv.Contributor{Name: "persist", Variables: map[string]string{"DSH_SESSION_JSONL": "the session log"}, Resolve: ok}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		c    shellenv.Contributor
		want string
	}{
		{shellenv.Contributor{Name: "", Resolve: ok}, `bash env contributor name must be non-empty`},
		{shellenv.Contributor{Name: "persist", Resolve: ok}, `bash env contributor "persist" is already registered`},
		{shellenv.Contributor{Name: "x", Variables: map[string]string{"HOME": "d"}, Resolve: ok}, `bash env contributor "x" declared invalid key "HOME"`},
		{shellenv.Contributor{Name: "x", Variables: map[string]string{"DSH_": "d"}, Resolve: ok}, `bash env contributor "x" declared invalid key "DSH_"`},
		{shellenv.Contributor{Name: "x", Variables: map[string]string{"DSH_1X": "d"}, Resolve: ok}, `bash env contributor "x" declared invalid key "DSH_1X"`},
		{shellenv.Contributor{Name: "x", Variables: map[string]string{"DSH_lower": "d"}, Resolve: ok}, `bash env contributor "x" declared invalid key "DSH_lower"`},
		{shellenv.Contributor{Name: "x", Variables: map[string]string{"DSH_A-B": "d"}, Resolve: ok}, `bash env contributor "x" declared invalid key "DSH_A-B"`},
		{shellenv.Contributor{Name: "x", Variables: map[string]string{"DSH_HOME": "d"}, Resolve: ok}, `bash env contributor "x" cannot own reserved key "DSH_HOME"`},
		{shellenv.Contributor{Name: "x", Variables: map[string]string{"DSH_SHELL": "d"}, Resolve: ok}, `bash env contributor "x" cannot own reserved key "DSH_SHELL"`},
		{shellenv.Contributor{Name: "x", Variables: map[string]string{"DSH_SESSION_ID": "d"}, Resolve: ok}, `bash env contributor "x" cannot own reserved key "DSH_SESSION_ID"`},
		{shellenv.Contributor{Name: "x", Variables: map[string]string{"DSH_X": ""}, Resolve: ok}, `bash env contributor "x" must describe "DSH_X"`},
		{shellenv.Contributor{Name: "x", Variables: map[string]string{"DSH_X": "  "}, Resolve: ok}, `bash env contributor "x" must describe "DSH_X"`},
		{shellenv.Contributor{Name: "x", Variables: map[string]string{"DSH_SESSION_JSONL": "mine"}, Resolve: ok}, `bash env key "DSH_SESSION_JSONL" is already owned by contributor "persist"; contributor "x" cannot also own it`},
	}
	for _, tc := range cases {
		err := r.Register(sc, tc.c)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Register(%q, %v) = %v, want %q", tc.c.Name, tc.c.Variables, err, tc.want)
		}
	}
	// A failed registration leaves nothing behind.
	if got := r.List(); !reflect.DeepEqual(got, []string{"DSH_SESSION_JSONL"}) {
		t.Fatalf("List() = %q", got)
	}
}

func TestCollectOrderAndUndeclared(t *testing.T) {
	r := shellenv.NewRegistry("/h")
	sc := newScope()
	defer sc.end()
	var order []string
	mk := func(name string, vars map[string]string) shellenv.Contributor {
		decl := map[string]string{}
		for k := range vars {
			decl[k] = "described"
		}
		return shellenv.Contributor{Name: name, Variables: decl, Resolve: func(_ context.Context, call shellenv.Call) (map[string]string, error) {
			order = append(order, name)
			return vars, nil
		}}
	}
	for _, c := range []shellenv.Contributor{mk("zeta", map[string]string{"DSH_Z": "z"}), mk("alpha", map[string]string{"DSH_B": "b", "DSH_A": "a"})} {
		if err := r.Register(sc, c); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := r.Collect(context.Background(), shellenv.Call{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(order, []string{"alpha", "zeta"}) {
		t.Fatalf("contributors resolved in order %q, want name order", order)
	}
	want := []string{"DSH_A=a", "DSH_B=b", "DSH_HOME=/h", "DSH_SHELL=1", "DSH_Z=z"}
	if got := snap.Env(); !reflect.DeepEqual(got, want) {
		t.Fatalf("env = %q, want %q (sorted)", got, want)
	}
	if got := r.List(); !reflect.DeepEqual(got, []string{"DSH_A", "DSH_B", "DSH_Z"}) {
		t.Fatalf("List() = %q", got)
	}

	// A contributor returning a key it never declared fails the collection.
	if err := r.Register(sc, shellenv.Contributor{Name: "liar", Variables: map[string]string{"DSH_L": "l"},
		Resolve: static(map[string]string{"DSH_L": "1", "DSH_OTHER": "2"})}); err != nil {
		t.Fatal(err)
	}
	_, err = r.Collect(context.Background(), shellenv.Call{})
	if err == nil || err.Error() != `bash env contributor "liar" returned undeclared key "DSH_OTHER"` {
		t.Fatalf("Collect = %v", err)
	}
}

func TestCollectReturnsReservedKeyIsUndeclared(t *testing.T) {
	// A contributor cannot override a built-in by returning it: it never declared it.
	r := shellenv.NewRegistry("/h")
	sc := newScope()
	defer sc.end()
	if err := r.Register(sc, shellenv.Contributor{Name: "spoof", Variables: map[string]string{"DSH_X": "x"},
		Resolve: static(map[string]string{"DSH_SESSION_ID": "evil"})}); err != nil {
		t.Fatal(err)
	}
	_, err := r.Collect(context.Background(), shellenv.Call{Session: &container.Session{ID: "real"}})
	if err == nil || err.Error() != `bash env contributor "spoof" returned undeclared key "DSH_SESSION_ID"` {
		t.Fatalf("Collect = %v", err)
	}
}

func TestCollectFailuresAreErrors(t *testing.T) {
	r := shellenv.NewRegistry("/h")
	sc := newScope()
	defer sc.end()
	_ = r.Register(sc, shellenv.Contributor{Name: "boom", Variables: map[string]string{"DSH_B": "b"},
		Resolve: func(context.Context, shellenv.Call) (map[string]string, error) {
			return nil, errors.New("disk on fire")
		}})
	_, err := r.Collect(context.Background(), shellenv.Call{})
	if err == nil || err.Error() != `bash env contributor "boom": disk on fire` {
		t.Fatalf("Collect = %v", err)
	}
	sc.end()

	sc2 := newScope()
	defer sc2.end()
	_ = r.Register(sc2, shellenv.Contributor{Name: "panicky", Variables: map[string]string{"DSH_P": "p"},
		Resolve: func(context.Context, shellenv.Call) (map[string]string, error) { panic("oops") }})
	_, err = r.Collect(context.Background(), shellenv.Call{})
	if err == nil || err.Error() != `bash env contributor "panicky" panicked: oops` {
		t.Fatalf("Collect = %v", err)
	}
}

func TestSnapshotImmutable(t *testing.T) {
	src := map[string]string{"DSH_B": "2", "DSH_A": "1"}
	s := shellenv.NewSnapshot(src)
	src["DSH_A"] = "changed"
	m := s.Map()
	m["DSH_A"] = "mutated"
	vars := s.Vars()
	vars[0].Value = "mutated"
	keys := s.Keys()
	keys[0] = "X"
	if v, _ := s.Get("DSH_A"); v != "1" {
		t.Fatalf("snapshot changed through a copy: %q", v)
	}
	if got := s.Env(); !reflect.DeepEqual(got, []string{"DSH_A=1", "DSH_B=2"}) {
		t.Fatalf("env = %q", got)
	}
	if _, ok := s.Get("DSH_C"); ok || s.Len() != 2 {
		t.Fatal("Get/Len wrong")
	}
	var zero shellenv.Snapshot
	if zero.Len() != 0 || len(zero.Map()) != 0 {
		t.Fatal("zero snapshot not empty")
	}
}

func TestConfig(t *testing.T) {
	t.Setenv("DSH_HOME", "/opt/dshhome")
	if got := shellenv.DefaultConfig().DshHome; got != "/opt/dshhome" {
		t.Fatalf("default dshHome = %q", got)
	}
	t.Setenv("DSH_HOME", "")
	t.Setenv("HOME", "/home/someone")
	if got := shellenv.DefaultConfig().DshHome; got != "/home/someone/.dsh" {
		t.Fatalf("default dshHome = %q", got)
	}
	t.Setenv("DSH_HOME", "rel/home")
	if got := shellenv.DefaultConfig().DshHome; !filepath.IsAbs(got) || !strings.HasSuffix(got, "/rel/home") {
		t.Fatalf("relative $DSH_HOME not made absolute: %q", got)
	}
	cat, err := container.NewCatalog(shellenv.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{})
	defer rt.Close()
	err = rt.Validate([]container.Row{{ID: "env", Plugin: "shell-env", Config: map[string]any{"dshHome": "relative"}}})
	if err == nil || err.Error() != `row "env": shell-env: dshHome must be an absolute path, got "relative"` {
		t.Fatalf("Validate = %v", err)
	}
}

// envPlugin is a contributor plugin: it injects bashEnv and registers one key.
var envPlugin = container.Define(container.Declaration[container.NoConfig]{
	Name:   "env-contrib",
	Inject: container.Keys{shellenv.Service},
	Apply: func(a *container.Activation, _ container.NoConfig) error {
		reg, err := container.Injected(a, shellenv.Service)
		if err != nil {
			return err
		}
		return reg.Register(a, shellenv.Contributor{
			Name:      "contrib",
			Variables: map[string]string{"DSH_CONTRIB": "a value from a test plugin"},
			Resolve:   static(map[string]string{"DSH_CONTRIB": "yes"}),
		})
	},
})

func TestPluginKeysFollowActivation(t *testing.T) {
	cat, err := container.NewCatalog(shellenv.Plugin, envPlugin)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{})
	defer rt.Close()
	err = rt.Compose("test", []container.Row{
		{ID: "shell-env", Plugin: "@deepseek-ai/dsh-shell-env", Config: map[string]any{"dshHome": "/srv/dsh"}},
		{ID: "contrib", Plugin: "env-contrib"},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg, ok := container.Lookup(rt, shellenv.Service)
	if !ok {
		t.Fatalf("no bashEnv service: %+v", rt.Status())
	}
	// The descriptions a contributor writes are shown: the shell-env row's detail.
	detail := func() string { return rt.Status().Rows[0].Detail }
	if got, want := detail(), "contributed variables: DSH_CONTRIB (contrib) — a value from a test plugin"; got != want {
		t.Fatalf("shell-env detail %q, want %q", got, want)
	}
	if got := reg.List(); !reflect.DeepEqual(got, []string{"DSH_CONTRIB"}) {
		t.Fatalf("List() = %q", got)
	}
	snap, err := reg.Collect(context.Background(), shellenv.Call{Session: &container.Session{ID: "abc"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"DSH_CONTRIB=yes", "DSH_HOME=/srv/dsh", "DSH_SESSION_ID=abc", "DSH_SHELL=1"}
	if got := snap.Env(); !reflect.DeepEqual(got, want) {
		t.Fatalf("env = %q, want %q", got, want)
	}
	if err := rt.Unmount("contrib"); err != nil {
		t.Fatal(err)
	}
	if got := reg.List(); len(got) != 0 {
		t.Fatalf("contributor keys survived its unload: %q", got)
	}
	if got := detail(); got != "" {
		t.Fatalf("shell-env detail after the contributor left: %q", got)
	}
	snap, _ = reg.Collect(context.Background(), shellenv.Call{})
	if _, ok := snap.Get("DSH_CONTRIB"); ok {
		t.Fatal("DSH_CONTRIB still collected after unload")
	}

	// A relative dshHome is a row error.
	err = rt.Mount(container.Row{ID: "bad", Plugin: "shell-env", Config: map[string]any{"dshHome": "x"}})
	if err == nil || !strings.Contains(err.Error(), `shell-env: dshHome must be an absolute path, got "x"`) {
		t.Fatalf("Mount = %v", err)
	}
}
