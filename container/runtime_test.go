package container_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
)

// Item 2: a row injecting shell with no provider is pending, naming the missing service
// and the catalog plugins that could provide it.
func TestPendingNamesMissingServiceAndCandidates(t *testing.T) {
	j := &journal{}
	rt := newRuntime(t,
		plug(j, "tool", []string{"shell"}, nil, nil),
		plug(j, "local", nil, []string{"shell"}, nil),
		plug(j, "sandbox", nil, []string{"shell", "sandboxPolicy"}, nil),
	)
	mustNil(t, rt.Mount(container.Row{ID: "tool", Plugin: "tool"}))
	rs := rowStatus(t, rt, "tool")
	if rs.State != container.StatePending {
		t.Fatalf("state %q, want pending", rs.State)
	}
	if !slices.Equal(rs.Missing, []string{"shell"}) {
		t.Fatalf("missing %q, want [shell]", rs.Missing)
	}
	if got := rs.Candidates["shell"]; !slices.Equal(got, []string{"local", "sandbox"}) {
		t.Fatalf("candidates %q, want [local sandbox]", got)
	}
	wantEntries(t, j.Take()) // nothing applied
}

// Item 2: mounting a provider activates the dependent; removing it unloads the dependent
// (its disposers in reverse order) back to pending; re-adding re-activates it by itself.
func TestProviderComesAndGoes(t *testing.T) {
	j := &journal{}
	tool := plug(j, "tool", []string{"shell"}, nil, func(a *container.Activation, _ *testConfig) {
		for i := 1; i <= 3; i++ {
			a.Defer(func() { j.Add("tool disposer %d", i) })
		}
	})
	rt := newRuntime(t, tool, plug(j, "local", nil, []string{"shell"}, nil))
	mustNil(t, rt.Mount(container.Row{ID: "tool", Plugin: "tool"}))
	mustNil(t, rt.Mount(container.Row{ID: "bash", Plugin: "local"}))
	wantState(t, rt, "tool", container.StateActive)
	if got := rowStatus(t, rt, "tool").Providers["shell"]; got != "bash" {
		t.Fatalf("providers[shell] = %q, want bash", got)
	}
	wantEntries(t, j.Take(), "apply bash", "apply tool from bash")

	mustNil(t, rt.Unmount("bash"))
	wantState(t, rt, "tool", container.StatePending)
	if rs := rowStatus(t, rt, "tool"); !slices.Equal(rs.Missing, []string{"shell"}) {
		t.Fatalf("missing %q", rs.Missing)
	}
	// The dependent unloads first, its disposers last-registered first; then the provider.
	wantEntries(t, j.Take(), "tool disposer 3", "tool disposer 2", "tool disposer 1", "dispose tool", "dispose bash")

	mustNil(t, rt.Mount(container.Row{ID: "bash", Plugin: "local"}))
	wantState(t, rt, "tool", container.StateActive)
	wantEntries(t, j.Take(), "apply bash", "apply tool from bash")
}

// Item 2: A → B → C cascades transitively, both ways, in dependency order.
func TestCascadeIsTransitive(t *testing.T) {
	j := &journal{}
	rt := newRuntime(t,
		plug(j, "a", nil, []string{"x"}, nil),
		plug(j, "b", []string{"x"}, []string{"y"}, nil),
		plug(j, "c", []string{"y"}, nil, nil),
	)
	mustNil(t, rt.Mount(container.Row{ID: "c", Plugin: "c"}))
	mustNil(t, rt.Mount(container.Row{ID: "b", Plugin: "b"}))
	wantState(t, rt, "b", container.StatePending)
	wantState(t, rt, "c", container.StatePending)
	if rs := rowStatus(t, rt, "c"); !slices.Equal(rs.Missing, []string{"y"}) || !slices.Equal(rs.Candidates["y"], []string{"b"}) {
		t.Fatalf("c: missing %q candidates %v", rs.Missing, rs.Candidates)
	}
	mustNil(t, rt.Mount(container.Row{ID: "a", Plugin: "a"}))
	wantEntries(t, j.Take(), "apply a", "apply b from a", "apply c from b")
	for id, st := range states(rt) {
		if st != container.StateActive {
			t.Fatalf("%s is %s", id, st)
		}
	}
	mustNil(t, rt.Unmount("a"))
	wantEntries(t, j.Take(), "dispose c", "dispose b", "dispose a")
	wantState(t, rt, "b", container.StatePending)
	wantState(t, rt, "c", container.StatePending)
	mustNil(t, rt.Mount(container.Row{ID: "a2", Plugin: "a"}))
	wantEntries(t, j.Take(), "apply a2", "apply b from a2", "apply c from b")
}

// Item 3: replacing a provider (another fiber) unloads and re-applies its dependents,
// which then see the new service.
func TestReplacingProviderReappliesDependents(t *testing.T) {
	j := &journal{}
	var seen []string
	tool := plug(j, "tool", []string{"shell"}, nil, func(a *container.Activation, _ *testConfig) {
		v, _ := container.Injected(a, key("shell"))
		seen = append(seen, v.Row)
	})
	rt := newRuntime(t, tool, plug(j, "local", nil, []string{"shell"}, nil), plug(j, "sandbox", nil, []string{"shell"}, nil))
	mustNil(t, rt.Compose("p", []container.Row{{ID: "bash", Plugin: "local"}, {ID: "tool", Plugin: "tool"}}))
	wantEntries(t, j.Take(), "apply bash", "apply tool from bash")

	// The same row id, another plugin (what `{id: bash, name: bash-sandbox}` does).
	mustNil(t, rt.Compose("p", []container.Row{{ID: "bash", Plugin: "sandbox"}, {ID: "tool", Plugin: "tool"}}))
	wantEntries(t, j.Take(), "dispose tool", "dispose bash", "apply bash", "apply tool from bash")
	if got, _ := container.Lookup(rt, key("shell")); got == nil || got.Row != "bash" {
		t.Fatalf("shell = %+v", got)
	}
	if rowStatus(t, rt, "bash").Plugin != "sandbox" {
		t.Fatal("bash row does not run sandbox")
	}

	// Another row id: unmount one provider, mount the other.
	mustNil(t, rt.Unmount("bash"))
	mustNil(t, rt.Mount(container.Row{ID: "bash2", Plugin: "local"}))
	wantEntries(t, j.Take(), "dispose tool", "dispose bash", "apply bash2", "apply tool from bash2")
	if !slices.Equal(seen, []string{"bash", "bash", "bash2"}) {
		t.Fatalf("the tool saw providers %q", seen)
	}
}

// Item 4: a second provider of one service fails loudly, naming the service and the
// first provider; the first (and its dependents) are untouched.
func TestSecondProviderFails(t *testing.T) {
	j := &journal{}
	rt := newRuntime(t,
		plug(j, "tool", []string{"shell"}, nil, nil),
		plug(j, "local", nil, []string{"shell"}, nil),
		plug(j, "sandbox", nil, []string{"shell"}, nil),
	)
	mustNil(t, rt.Mount(container.Row{ID: "bash", Plugin: "local"}))
	mustNil(t, rt.Mount(container.Row{ID: "tool", Plugin: "tool"}))
	j.Take()
	mustNil(t, rt.Mount(container.Row{ID: "other", Plugin: "sandbox"}))
	rs := rowStatus(t, rt, "other")
	if rs.State != container.StateFailed {
		t.Fatalf("second provider is %s", rs.State)
	}
	for _, part := range []string{`service "shell"`, `row "bash"`, "local"} {
		if !strings.Contains(rs.Error, part) {
			t.Fatalf("error %q does not name %s", rs.Error, part)
		}
	}
	wantState(t, rt, "bash", container.StateActive)
	wantState(t, rt, "tool", container.StateActive)
	wantEntries(t, j.Take()) // nothing applied, nothing disposed
	if v, _ := container.Lookup(rt, key("shell")); v.Row != "bash" {
		t.Fatalf("shell now from %q", v.Row)
	}
}

// A second provider that failed on the conflict is retried once the first provider's
// row leaves the composition (a reload removed it): it activates, and its dependents
// follow. A row that merely restarts keeps its place: it is re-applied first, and the
// second provider fails again naming it.
func TestConflictFailedProviderRetriedWhenTheConflictIsGone(t *testing.T) {
	j := &journal{}
	rt := newRuntime(t,
		plug(j, "local", nil, []string{"shell"}, nil),
		plug(j, "remote", nil, []string{"shell"}, nil),
		plug(j, "tool", []string{"shell"}, nil, nil),
	)
	first := container.Row{ID: "bash", Plugin: "local"}
	second := container.Row{ID: "ssh", Plugin: "remote"}
	tool := container.Row{ID: "tool", Plugin: "tool"}
	mustNil(t, rt.Compose("p", []container.Row{first, second, tool}))
	wantEntries(t, j.Take(), "apply bash", "apply tool from bash")
	wantTextContains(t, rowStatus(t, rt, "ssh").Error, `service "shell" is already provided by row "bash" (local)`)

	// bash restarts (its config changed): the conflict is still there.
	first.Config = map[string]any{"value": "v2"}
	mustNil(t, rt.Compose("p", []container.Row{first, second, tool}))
	wantEntries(t, j.Take(), "dispose tool", "dispose bash", "apply bash", "apply tool from bash")
	wantState(t, rt, "ssh", container.StateFailed)
	wantTextContains(t, rowStatus(t, rt, "ssh").Error, `row "bash"`)

	// bash leaves: ssh is retried, and the tool comes back over it.
	mustNil(t, rt.Compose("p", []container.Row{second, tool}))
	wantEntries(t, j.Take(), "dispose tool", "dispose bash", "apply ssh", "apply tool from ssh")
	if rs := rowStatus(t, rt, "ssh"); rs.State != container.StateActive || rs.Error != "" {
		t.Fatalf("ssh after bash left: %s %q", rs.State, rs.Error)
	}
}

// A failed duplicate provider never keeps naming a row that is gone: when the row it
// conflicted with is replaced by another row (another id), the two are retried in
// profile order, and the one that fails now names the one that provides.
func TestConflictNamesOnlyRowsThatExist(t *testing.T) {
	j := &journal{}
	rt := newRuntime(t, plug(j, "local", nil, []string{"shell"}, nil), plug(j, "remote", nil, []string{"shell"}, nil))
	mustNil(t, rt.Compose("p", []container.Row{{ID: "a", Plugin: "local"}, {ID: "b", Plugin: "remote"}}))
	wantEntries(t, j.Take(), "apply a")
	wantState(t, rt, "b", container.StateFailed)

	mustNil(t, rt.Unmount("a"))
	mustNil(t, rt.Mount(container.Row{ID: "c", Plugin: "local"}))
	wantEntries(t, j.Take(), "dispose a", "apply b")
	wantState(t, rt, "b", container.StateActive)
	rs := rowStatus(t, rt, "c")
	if rs.State != container.StateFailed || !strings.Contains(rs.Error, `already provided by row "b" (remote)`) {
		t.Fatalf("c: %s %q", rs.State, rs.Error)
	}
	for _, r := range rt.Status().Rows {
		if strings.Contains(r.Error, `row "a"`) {
			t.Fatalf("row %s names the removed row a: %q", r.ID, r.Error)
		}
	}
}

// Item 4: a profile with two enabled providers of an exclusive service (here `shell`,
// which the executors declare exclusive) is rejected before anything starts, naming
// both row ids (and their files). One provider declaring it is enough.
func TestTwoShellProvidersRejectedBeforeStart(t *testing.T) {
	j := &journal{}
	rt := newRuntime(t,
		plug(j, "tools", nil, []string{"tools"}, nil),
		exclusive(plug(j, "local", nil, []string{"shell"}, nil), "shell"),
		plug(j, "sandbox", nil, []string{"shell"}, nil),
	)
	rows := []container.Row{
		{ID: "tools", Plugin: "tools", Source: "p.yaml"},
		{ID: "bash", Plugin: "local", Source: "base.yaml"},
		{ID: "confined", Plugin: "sandbox", Source: "p.yaml"},
	}
	err := rt.Compose("p", rows)
	wantErrContains(t, err, `service "shell" has more than one enabled provider`, `row "bash" (base.yaml)`, `row "confined" (p.yaml)`)
	wantErrContains(t, rt.Validate(rows), `row "bash"`, `row "confined"`)
	wantEntries(t, j.Take())
	if n := len(rt.Status().Rows); n != 0 {
		t.Fatalf("%d rows mounted after a rejected profile", n)
	}
	rows[2].Disabled = true
	mustNil(t, rt.Compose("p", rows))
	wantEntries(t, j.Take(), "apply tools", "apply bash")
}

// Any service can be exclusive: its provider says so, and Validate (what `dsh check`
// runs) refuses two enabled providers; without the declaration two are a valid profile
// (the second fails at run time). A service declared exclusive must be provided.
func TestExclusiveServiceDeclaredByItsProvider(t *testing.T) {
	j := &journal{}
	rt := newRuntime(t,
		exclusive(plug(j, "primary", nil, []string{"db", "cache"}, nil), "db"),
		plug(j, "replica", nil, []string{"db"}, nil),
		plug(j, "memo", nil, []string{"cache"}, nil),
	)
	err := rt.Validate([]container.Row{
		{ID: "a", Plugin: "primary", Source: "p.yaml"},
		{ID: "b", Plugin: "replica", Source: "p.yaml"},
	})
	if want := `service "db" has more than one enabled provider: row "a" (p.yaml), row "b" (p.yaml); disable all but one`; err == nil || err.Error() != want {
		t.Fatalf("two providers of an exclusive service: %v, want %q", err, want)
	}
	mustNil(t, rt.Validate([]container.Row{{ID: "a", Plugin: "primary"}, {ID: "m", Plugin: "memo"}}))
	if !rt.Catalog().Exclusive("db") || rt.Catalog().Exclusive("cache") {
		t.Fatal("Catalog.Exclusive disagrees with the declarations")
	}

	_, err = container.NewCatalog(exclusive(plug(j, "liar", nil, []string{"x"}, nil), "y"))
	wantErrContains(t, err, `catalog: plugin "liar" declares service "y" exclusive but does not provide it`)
}

// Item 5: an apply that errors or panics fails only that fiber, keeps its error;
// siblings stay active; a dependency refresh never re-runs a failed apply; a config
// change does.
func TestFailingApplyIsolated(t *testing.T) {
	j := &journal{}
	var cancelled atomic.Int32
	watchCtx := func(a *container.Activation, _ *testConfig) {
		c := a.Context()
		a.Defer(func() {
			if c.Err() != nil {
				cancelled.Add(1)
			}
		})
	}
	rt := newRuntime(t,
		plug(j, "local", nil, []string{"shell"}, nil),
		plug(j, "sandbox", nil, []string{"shell"}, nil),
		plug(j, "flaky", []string{"shell"}, nil, watchCtx),
		plug(j, "sibling", []string{"shell"}, nil, nil),
	)
	rows := func(bash string, flaky map[string]any, panicky map[string]any) []container.Row {
		return []container.Row{
			{ID: "bash", Plugin: bash},
			{ID: "flaky", Plugin: "flaky", Config: flaky},
			{ID: "panicky", Plugin: "flaky", Config: panicky},
			{ID: "sibling", Plugin: "sibling"},
		}
	}
	mustNil(t, rt.Compose("p", rows("local", map[string]any{"fail": true}, map[string]any{"panic": true})))
	fl := rowStatus(t, rt, "flaky")
	if fl.State != container.StateFailed || fl.Error != "flaky refuses to start" {
		t.Fatalf("flaky: %s %q", fl.State, fl.Error)
	}
	pn := rowStatus(t, rt, "panicky")
	if pn.State != container.StateFailed || pn.Error != "flaky: apply panicked: boom from panicky" {
		t.Fatalf("panicky: %s %q", pn.State, pn.Error)
	}
	wantState(t, rt, "sibling", container.StateActive)
	wantState(t, rt, "bash", container.StateActive)
	// Whatever a failed apply registered was undone, with its context cancelled first.
	if n := j.Count("dispose flaky") + j.Count("dispose panicky"); n != 2 {
		t.Fatalf("failed activations disposed %d times, want 2", n)
	}
	if cancelled.Load() != 2 {
		t.Fatalf("contexts cancelled before disposers: %d, want 2", cancelled.Load())
	}
	j.Take()

	// Dependency refresh: the provider is replaced; the sibling follows, failed rows stay.
	mustNil(t, rt.Compose("p", rows("sandbox", map[string]any{"fail": true}, map[string]any{"panic": true})))
	wantEntries(t, j.Take(), "dispose sibling", "dispose bash", "apply bash", "apply sibling from bash")
	wantState(t, rt, "flaky", container.StateFailed)
	if rowStatus(t, rt, "flaky").Error != "flaky refuses to start" {
		t.Fatal("failed row lost its error")
	}

	// A config change re-runs the apply.
	mustNil(t, rt.Compose("p", rows("sandbox", map[string]any{"fail": false}, map[string]any{"panic": true})))
	wantEntries(t, j.Take(), "apply flaky from bash")
	wantState(t, rt, "flaky", container.StateActive)
	wantState(t, rt, "panicky", container.StateFailed)
	if rowStatus(t, rt, "flaky").Error != "" {
		t.Fatal("error kept after a good apply")
	}
}

// Item 5: a plugin that does not provide a declared service, or provides one it did not
// declare, fails with a clear error.
func TestApplyMustProvideWhatItDeclares(t *testing.T) {
	lazy := container.Define(container.Declaration[container.NoConfig]{Name: "lazy", Provide: keys("x"), Apply: func(*container.Activation, container.NoConfig) error { return nil }})
	var stray error
	sneaky := container.Define(container.Declaration[container.NoConfig]{Name: "sneaky", Apply: func(a *container.Activation, _ container.NoConfig) error {
		stray = key("y").Provide(a, &svc{})
		return nil
	}})
	var leakyCtx *container.Activation
	leaky := container.Define(container.Declaration[container.NoConfig]{Name: "leaky", Provide: keys("z"), Apply: func(a *container.Activation, _ container.NoConfig) error {
		leakyCtx = a
		return key("z").Provide(a, &svc{})
	}})
	rt := newRuntime(t, lazy, sneaky, leaky)
	mustNil(t, rt.Compose("p", []container.Row{{ID: "lazy", Plugin: "lazy"}, {ID: "sneaky", Plugin: "sneaky"}, {ID: "leaky", Plugin: "leaky"}}))
	if rs := rowStatus(t, rt, "lazy"); rs.State != container.StateFailed || !strings.Contains(rs.Error, `without providing declared service "x"`) {
		t.Fatalf("lazy: %s %q", rs.State, rs.Error)
	}
	wantErrContains(t, stray, `provide "y": not in the plugin's declared provide list`)
	wantState(t, rt, "leaky", container.StateActive)
	// Provide after Apply returned is refused: the service could never be published.
	wantErrContains(t, key("z").Provide(leakyCtx, &svc{}), "Apply has already returned")
}

// Item 6: an inject/provide cycle is reported with its path at validation, never left
// pending; Mount reports it on the row that closes the cycle.
func TestCycleReportedWithPath(t *testing.T) {
	j := &journal{}
	rt := newRuntime(t,
		plug(j, "a", []string{"z"}, []string{"x"}, nil),
		plug(j, "b", []string{"x"}, []string{"y"}, nil),
		plug(j, "c", []string{"y"}, []string{"z"}, nil),
		plug(j, "self", []string{"s"}, []string{"s"}, nil),
		plug(j, "root", nil, []string{"r"}, nil),
	)
	rows := []container.Row{
		{ID: "root", Plugin: "root", Source: "p.yaml"},
		{ID: "ra", Plugin: "a", Source: "p.yaml"},
		{ID: "rb", Plugin: "b", Source: "p.yaml"},
		{ID: "rc", Plugin: "c", Source: "p.yaml"},
	}
	err := rt.Validate(rows)
	want := `inject/provide cycle: row "ra" (p.yaml) injects "z" provided by row "rc" → ` +
		`row "rc" (p.yaml) injects "y" provided by row "rb" → row "rb" (p.yaml) injects "x" provided by row "ra"`
	if err == nil || err.Error() != want {
		t.Fatalf("error:\n got  %v\n want %s", err, want)
	}
	wantErrContains(t, rt.Compose("p", rows), "inject/provide cycle")
	wantErrContains(t, rt.Validate([]container.Row{{ID: "me", Plugin: "self"}}),
		`inject/provide cycle: row "me" injects "s" provided by row "me"`)
	wantEntries(t, j.Take())

	// Row by row: Mount composes again, so the row that would close the cycle is
	// refused with the path and nothing changes; the others stay pending.
	mustNil(t, rt.Mount(container.Row{ID: "ra", Plugin: "a"}))
	mustNil(t, rt.Mount(container.Row{ID: "rb", Plugin: "b"}))
	err = rt.Mount(container.Row{ID: "rc", Plugin: "c"})
	for _, part := range []string{"inject/provide cycle: ", `row "ra" injects "z" provided by row "rc"`, `row "rb" injects "x" provided by row "ra"`, `row "rc" injects "y" provided by row "rb"`} {
		wantErrContains(t, err, part)
	}
	if got := states(rt); len(got) != 2 || got["ra"] != container.StatePending || got["rb"] != container.StatePending {
		t.Fatalf("after the refused mount: %v", got)
	}
	// A row that is a cycle by itself is refused outright.
	err = rt.Mount(container.Row{ID: "me", Plugin: "self"})
	if err == nil || err.Error() != `inject/provide cycle: row "me" injects "s" provided by row "me"` {
		t.Fatalf("mount self-cycle: %v", err)
	}
	wantEntries(t, j.Take())
}

// Item 7: the per-activation context is cancelled on every unload, goroutines started
// in apply stop, and the end of an activation waits for them.
func TestActivationContextAndGoroutines(t *testing.T) {
	j := &journal{}
	var ctxs []context.Context
	var acts []*container.Activation
	var running atomic.Int32
	worker := plug(j, "worker", []string{"shell"}, nil, func(a *container.Activation, _ *testConfig) {
		ctxs = append(ctxs, a.Context())
		acts = append(acts, a)
		for range 3 {
			running.Add(1)
			a.Go(func(c context.Context) {
				defer running.Add(-1)
				<-c.Done()
			})
		}
	})
	rt := newRuntime(t, worker, plug(j, "local", nil, []string{"shell"}, nil))
	mustNil(t, rt.Mount(container.Row{ID: "bash", Plugin: "local"}))
	mustNil(t, rt.Mount(container.Row{ID: "w", Plugin: "worker"}))
	if running.Load() != 3 || ctxs[0].Err() != nil {
		t.Fatalf("running %d, ctx err %v", running.Load(), ctxs[0].Err())
	}
	// Unload by cascade: the provider goes away.
	mustNil(t, rt.Unmount("bash"))
	if ctxs[0].Err() == nil {
		t.Fatal("context not cancelled on unload")
	}
	if running.Load() != 0 {
		t.Fatalf("%d goroutines still running after the unload returned", running.Load())
	}
	// Re-activation gets a fresh context; a config restart cancels it.
	mustNil(t, rt.Mount(container.Row{ID: "bash", Plugin: "local"}))
	if len(ctxs) != 2 || ctxs[1].Err() != nil || running.Load() != 3 {
		t.Fatalf("re-activation: %d contexts, running %d", len(ctxs), running.Load())
	}
	mustNil(t, rt.Compose("p", []container.Row{{ID: "bash", Plugin: "local"}, {ID: "w", Plugin: "worker", Config: map[string]any{"value": "x"}}}))
	if ctxs[1].Err() == nil || len(ctxs) != 3 {
		t.Fatal("restart did not cancel the old activation")
	}
	// Close cancels the rest; goleak (TestMain) checks nothing is left.
	rt.Close()
	if ctxs[2].Err() == nil || running.Load() != 0 {
		t.Fatalf("after Close: ctx err %v, running %d", ctxs[2].Err(), running.Load())
	}
	// After the activation ended, Go is a no-op and Defer runs at once.
	late := acts[2]
	ran := false
	late.Defer(func() { ran = true })
	if !ran {
		t.Fatal("Defer after the end did not run at once")
	}
	late.Go(func(context.Context) { t.Error("Go after the end ran") })
}

// Item 7 / OnStop: Close disposes every fiber in reverse activation order.
func TestCloseDisposesInReverseActivationOrder(t *testing.T) {
	j := &journal{}
	rt := newRuntime(t,
		plug(j, "a", nil, []string{"x"}, nil),
		plug(j, "b", []string{"x"}, []string{"y"}, nil),
		plug(j, "c", []string{"y"}, nil, nil),
		plug(j, "d", nil, nil, nil),
	)
	// Profile order differs from activation order: c and b wait for a.
	mustNil(t, rt.Compose("p", []container.Row{{ID: "c", Plugin: "c"}, {ID: "b", Plugin: "b"}, {ID: "a", Plugin: "a"}, {ID: "d", Plugin: "d"}}))
	wantEntries(t, j.Take(), "apply a", "apply d", "apply b from a", "apply c from b")
	rt.Close()
	wantEntries(t, j.Take(), "dispose c", "dispose b", "dispose d", "dispose a")
	for id, st := range states(rt) {
		if st != container.StateDisposed {
			t.Fatalf("%s is %s after Close", id, st)
		}
	}
	rt.Close() // idempotent
	wantErrContains(t, rt.Compose("p", nil), "closed")
	wantErrContains(t, rt.Mount(container.Row{ID: "e", Plugin: "d"}), "closed")
}

// Item 8: the status API, as JSON.
func TestStatusJSON(t *testing.T) {
	j := &journal{}
	rt := newRuntime(t,
		plug(j, "local", nil, []string{"shell"}, func(a *container.Activation, _ *testConfig) { a.SetDetail("process groups only") }),
		plug(j, "tool", []string{"shell", "tools"}, nil, nil),
		plug(j, "tools", nil, []string{"tools"}, nil),
		plug(j, "broken", nil, nil, nil),
	)
	before := time.Now()
	mustNil(t, rt.Compose("my-profile", []container.Row{
		{ID: "bash", Plugin: "@test/local"},
		{ID: "tool", Plugin: "tool"},
		{ID: "broken", Plugin: "broken", Config: map[string]any{"fail": true}},
	}))
	data, err := json.Marshal(rt.Status())
	mustNil(t, err)
	var got struct {
		Profile         string `json:"profile"`
		LastReloadError string `json:"lastReloadError"`
		Rows            []struct {
			ID         string              `json:"id"`
			Plugin     string              `json:"plugin"`
			State      string              `json:"state"`
			Missing    []string            `json:"missing"`
			Error      string              `json:"error"`
			Providers  map[string]string   `json:"providers"`
			Candidates map[string][]string `json:"candidates"`
			Detail     string              `json:"detail"`
			Since      time.Time           `json:"since"`
		} `json:"rows"`
	}
	mustNil(t, json.Unmarshal(data, &got))
	if got.Profile != "my-profile" || got.LastReloadError != "" || len(got.Rows) != 3 {
		t.Fatalf("status %s", data)
	}
	bash, tool, broken := got.Rows[0], got.Rows[1], got.Rows[2]
	if bash.ID != "bash" || bash.Plugin != "local" || bash.State != "active" || bash.Detail != "process groups only" || len(bash.Missing) != 0 {
		t.Fatalf("bash row: %+v", bash)
	}
	if bash.Since.Before(before.Add(-time.Second)) || bash.Since.After(time.Now()) {
		t.Fatalf("since %v", bash.Since)
	}
	if tool.State != "pending" || !slices.Equal(tool.Missing, []string{"tools"}) ||
		tool.Providers["shell"] != "bash" || !slices.Equal(tool.Candidates["tools"], []string{"tools"}) {
		t.Fatalf("tool row: %+v", tool)
	}
	if broken.State != "failed" || broken.Error != "broken refuses to start" {
		t.Fatalf("broken row: %+v", broken)
	}
	if !strings.Contains(string(data), `"missing":[]`) {
		t.Fatalf("an active row's missing should be [] in JSON: %s", data)
	}
}

// Item 8 / DESIGN: a hung apply is reported (state loading, error set) and Status and
// Lookup keep answering while plugin code runs; a slow disposer shows `unloading`.
func TestHungApplyReportedAndRuntimeResponsive(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	slow := container.Define(container.Declaration[container.NoConfig]{Name: "slow", Provide: keys("s"), Apply: func(a *container.Activation, _ container.NoConfig) error {
		close(entered)
		<-release
		a.Defer(func() { <-release })
		return key("s").Provide(a, &svc{})
	}})
	cat, err := container.NewCatalog(slow)
	mustNil(t, err)
	rt := container.NewRuntime(cat, container.Options{Logger: quiet, ApplyWarnAfter: 20 * time.Millisecond})
	done := make(chan error)
	go func() { done <- rt.Compose("p", []container.Row{{ID: "slow", Plugin: "slow"}}) }()
	<-entered
	waitFor(t, 10*time.Second, "hung apply report", func() bool {
		rs := rt.Status().Rows
		return len(rs) == 1 && rs[0].State == container.StateLoading && strings.Contains(rs[0].Error, "apply has not returned after 20ms")
	})
	if _, ok := container.Lookup(rt, key("s")); ok {
		t.Fatal("service visible before apply returned")
	}
	release <- struct{}{}
	mustNil(t, <-done)
	wantState(t, rt, "slow", container.StateActive)
	if rowStatus(t, rt, "slow").Error != "" {
		t.Fatal("hung report kept after apply returned")
	}
	closed := make(chan struct{})
	go func() { rt.Close(); close(closed) }()
	waitFor(t, 10*time.Second, "unloading state", func() bool { return rt.Status().Rows[0].State == container.StateUnloading })
	close(release)
	<-closed
	wantState(t, rt, "slow", container.StateDisposed)
}

// Compose diffs by id: unchanged rows keep running, config changes restart only that
// row (dependents follow), removed and disabled rows are disposed, new rows mount.
func TestComposeDiffsByID(t *testing.T) {
	j := &journal{}
	var values []string
	rt := newRuntime(t,
		plug(j, "p", nil, []string{"x"}, func(_ *container.Activation, c *testConfig) { values = append(values, c.Value) }),
		plug(j, "dep", []string{"x"}, nil, nil),
		plug(j, "other", nil, nil, nil),
	)
	base := []container.Row{{ID: "p", Plugin: "p"}, {ID: "dep", Plugin: "dep"}, {ID: "o1", Plugin: "other"}, {ID: "o2", Plugin: "other"}}
	mustNil(t, rt.Compose("p", base))
	j.Take()
	// The same rows again (config by alias, empty config map): nothing happens.
	same := slices.Clone(base)
	same[0].Config = map[string]any{}
	same[2].Plugin = "@test/other"
	mustNil(t, rt.Compose("p", same))
	wantEntries(t, j.Take())

	next := []container.Row{
		{ID: "p", Plugin: "p", Config: map[string]any{"value": "new"}},
		{ID: "dep", Plugin: "dep"},
		{ID: "o2", Plugin: "other", Disabled: true},
		{ID: "o3", Plugin: "other"},
	}
	mustNil(t, rt.Compose("p", next))
	got := j.Take()
	// Removed rows and the restarted provider go (reverse activation order), then the
	// new activations in profile order.
	wantEntries(t, got, "dispose o2", "dispose o1", "dispose dep", "dispose p", "apply p", "apply dep from p", "apply o3")
	if values[len(values)-1] != "new" {
		t.Fatalf("apply saw %q", values)
	}
	var ids []string
	for _, rs := range rt.Status().Rows {
		ids = append(ids, rs.ID)
	}
	if !slices.Equal(ids, []string{"p", "dep", "o3"}) {
		t.Fatalf("rows %q", ids)
	}
}

// Validation errors name the file, the row and the key.
func TestValidateNamesFileRowAndKey(t *testing.T) {
	j := &journal{}
	rt := newRuntime(t, plug(j, "p", nil, nil, nil), container.Define(container.Declaration[container.NoConfig]{Name: "bare", Apply: func(*container.Activation, container.NoConfig) error { return nil }}))
	err := rt.Validate([]container.Row{
		{ID: "a", Plugin: "nope", Source: "one.yaml"},
		{ID: "b", Plugin: "p", Config: map[string]any{"bogus": 1}, Source: "one.yaml"},
		{ID: "c", Plugin: "p", Config: map[string]any{"limit": "ten"}, Source: "two.yaml"},
		{ID: "d", Plugin: "p", Config: map[string]any{"limit": -3}, Source: "two.yaml"},
		{ID: "b", Plugin: "p", Source: "two.yaml"},
		{ID: "e", Plugin: "p", Config: map[string]any{"inner": map[string]any{"c": 1}}, Source: "two.yaml"},
		{ID: "f", Plugin: "bare", Config: map[string]any{"x": 1}, Source: "two.yaml"},
		{ID: "g", Plugin: "p", Config: map[string]any{"limit": 1.5}, Source: "two.yaml"},
		{ID: "h", Plugin: "p", Config: map[string]any{"limit": 1e300}, Source: "two.yaml"},
		{ID: "i", Plugin: "p", Config: map[string]any{"count": "many"}, Source: "two.yaml"},
		{ID: "j", Plugin: "p", Config: map[string]any{"counts": []any{1, "x"}}, Source: "two.yaml"},
		{ID: "k", Plugin: "p", Config: map[string]any{"counts": "x"}, Source: "two.yaml"},
	})
	for _, line := range []string{
		`one.yaml: row "a": module not found: nope (this dsh binary has no plugin of that name; it has: bare, p. ` +
			`A plugin from another Go module is compiled into a dsh binary built with it: see the README, "Writing a plugin")`,
		`one.yaml: row "b": config: unknown key "bogus" (known keys: count, counts, fail, inner, limit, panic, value)`,
		`two.yaml: row "c": config: key "limit": expected an integer, got the string "ten"`,
		`two.yaml: row "d": p: limit must not be negative, got -3`, // Validate's, named by the container
		`two.yaml: row "b": duplicate id`,
		`two.yaml: row "e": config: unknown key "inner.c" (known keys: a, b)`,
		`two.yaml: row "f": config: unknown key "x" (bare takes no config)`,
		`two.yaml: row "g": config: key "limit": expected an integer, got the number 1.5`,
		`two.yaml: row "h": config: key "limit": 1e+300 is out of range`,
		// A field's valid tag words a value of the wrong type there, not in its elements.
		`two.yaml: row "i": p: count must be a positive number, got the string "many"`,
		`two.yaml: row "j": config: key "counts[1]": expected a number, got the string "x"`,
		`two.yaml: row "k": p: counts must be a list of positive numbers, got the string "x"`,
	} {
		if !slices.Contains(strings.Split(err.Error(), "\n"), line) {
			t.Errorf("missing %q in:\n%v", line, err)
		}
	}
}

// EndSession runs the active plugins' session-end hooks, at the same time (each hook
// here waits until every other has started); a hook's registration ends with its
// activation.
func TestEndSessionHooks(t *testing.T) {
	j := &journal{}
	var started sync.WaitGroup
	rt := newRuntime(t, plug(j, "jobs", nil, nil, func(a *container.Activation, _ *testConfig) {
		a.OnSessionEnd(func(id string) {
			if id == "s1" {
				started.Done()
				started.Wait() // never returns if the hooks ran one after the other
			}
			j.Add("end %s in %s", id, a.ID())
		})
	}))
	mustNil(t, rt.Mount(container.Row{ID: "j1", Plugin: "jobs"}))
	mustNil(t, rt.Mount(container.Row{ID: "j2", Plugin: "jobs"}))
	j.Take()
	started.Add(2)
	rt.EndSession("s1")
	got := j.Take()
	slices.Sort(got)
	wantEntries(t, got, "end s1 in j1", "end s1 in j2")
	mustNil(t, rt.Unmount("j1"))
	j.Take()
	rt.EndSession("s2")
	wantEntries(t, j.Take(), "end s2 in j2")
}

// Subscribers hear about every operation, outside the runtime's locks.
func TestSubscribe(t *testing.T) {
	j := &journal{}
	rt := newRuntime(t, plug(j, "p", nil, []string{"x"}, nil))
	var calls atomic.Int32
	cancel := rt.Subscribe(func() {
		calls.Add(1)
		rt.Status() // must not deadlock
		container.Lookup(rt, key("x"))
	})
	mustNil(t, rt.Mount(container.Row{ID: "p", Plugin: "p"}))
	mustNil(t, rt.Unmount("p"))
	if calls.Load() != 2 {
		t.Fatalf("%d notifications, want 2", calls.Load())
	}
	cancel()
	mustNil(t, rt.Mount(container.Row{ID: "p", Plugin: "p"}))
	if calls.Load() != 2 {
		t.Fatal("notified after cancel")
	}
}

// A row that can never activate — directly, or because its only provider cannot — is
// named with the service and the catalog plugins that could provide it; a valid
// composition passes.
func TestCheckActivation(t *testing.T) {
	j := &journal{}
	rt := newRuntime(t,
		plug(j, "exec", nil, []string{"shell"}, nil),
		plug(j, "exec2", nil, []string{"shell"}, nil),
		plug(j, "tool", []string{"shell"}, []string{"tools"}, nil),
		plug(j, "ui", []string{"tools"}, nil, nil),
		plug(j, "needs-db", []string{"db"}, []string{"cache"}, nil),
		plug(j, "cached", []string{"cache"}, nil, nil),
	)
	ok := []container.Row{{ID: "bash", Plugin: "exec"}, {ID: "tool", Plugin: "tool"}, {ID: "ui", Plugin: "ui"}}
	if err := rt.CheckActivation(ok); err != nil {
		t.Errorf("a complete composition: %v", err)
	}
	err := rt.CheckActivation([]container.Row{
		{ID: "bash", Plugin: "exec", Disabled: true, Source: "p.yaml"},
		{ID: "tool", Plugin: "tool", Source: "p.yaml"},
		{ID: "ui", Plugin: "ui", Source: "p.yaml"},
		{ID: "db-user", Plugin: "needs-db", Source: "p.yaml"},
		{ID: "c", Plugin: "cached", Source: "p.yaml"},
		{ID: "x", Plugin: "unknown", Source: "p.yaml"},
	})
	want := []string{
		`p.yaml: row "tool": can never activate: it injects "shell", which no enabled row provides (row "bash", which would, is disabled in p.yaml) (plugins that provide it: exec, exec2)`,
		`p.yaml: row "ui": can never activate: it injects "tools", whose provider (row "tool") can never activate either (plugins that provide it: tool)`,
		`p.yaml: row "db-user": can never activate: it injects "db", which no enabled row provides (no plugin in this binary provides it)`,
		`p.yaml: row "c": can never activate: it injects "cache", whose provider (row "db-user") can never activate either (plugins that provide it: needs-db)`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("got:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
}

// A reload that replaces a row (another config or another plugin under its id) lets the
// new activation see what the row ran before — once; other activations see nothing.
func TestActivationSeesWhatAReloadReplaced(t *testing.T) {
	type seen struct {
		value string
	}
	var mu sync.Mutex
	var log []*seen
	watch := func(name string) container.Plugin {
		return container.Define(container.Declaration[*testConfig]{
			Name:    name,
			Provide: keys("svc"),
			Config:  func() *testConfig { return &testConfig{Value: "default"} },
			Apply: func(a *container.Activation, _ *testConfig) error {
				var s *seen
				if prev, ok := container.ReplacedConfig[*testConfig](a); ok {
					s = &seen{value: prev.Value}
				}
				if _, ok := container.ReplacedConfig[*struct{}](a); ok {
					t.Error("ReplacedConfig answered for another config type")
				}
				mu.Lock()
				log = append(log, s)
				mu.Unlock()
				return key("svc").Provide(a, &svc{})
			},
		})
	}
	rt := newRuntime(t, watch("one"), watch("two"))
	for _, rows := range [][]container.Row{
		{{ID: "r", Plugin: "one", Config: map[string]any{"value": "a"}}},
		{{ID: "r", Plugin: "one", Config: map[string]any{"value": "b"}}},
		{{ID: "r", Plugin: "two", Config: map[string]any{"value": "c"}}},
		{{ID: "r", Plugin: "two", Config: map[string]any{"value": "c"}}}, // unchanged: not restarted
	} {
		if err := rt.Compose("p", rows); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(log) != 3 || log[0] != nil || *log[1] != (seen{"a"}) || *log[2] != (seen{"b"}) {
		t.Errorf("activations saw %v", log)
	}
}

// WaitIdle returns at once when no operation runs, waits while one does (a Compose
// whose apply blocks, then a Close whose disposer blocks), and returns when it ends.
func TestWaitIdle(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	slow := container.Define(container.Declaration[container.NoConfig]{Name: "slow", Apply: func(a *container.Activation, _ container.NoConfig) error {
		entered <- struct{}{}
		<-release
		a.Defer(func() { entered <- struct{}{}; <-release })
		return nil
	}})
	rt := newRuntime(t, slow)
	idle := func(d time.Duration) bool {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return rt.WaitIdle(ctx)
	}
	if !idle(time.Minute) {
		t.Fatal("a new runtime is not idle")
	}
	for _, op := range []func(){
		func() { mustNil(t, rt.Compose("p", []container.Row{{ID: "slow", Plugin: "slow"}})) },
		rt.Close,
	} {
		done := make(chan struct{})
		go func() { op(); close(done) }()
		<-entered
		if idle(50 * time.Millisecond) {
			t.Fatal("idle while an operation runs")
		}
		waited := make(chan bool)
		go func() { waited <- idle(time.Minute) }()
		release <- struct{}{}
		<-done
		if !<-waited {
			t.Fatal("WaitIdle did not return when the operation ended")
		}
	}
}
