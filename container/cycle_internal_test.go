package container

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
)

// checkCycle verifies that steps is a closed inject/provide path: each row injects the
// service, its provider declares it, and each provider is the next step's row.
func checkCycle(t *testing.T, steps []cycleStep, plugins map[string]*Plugin) {
	t.Helper()
	for i, st := range steps {
		p := plugins[st.row.ID]
		if !slices.Contains(p.inject, st.service) {
			t.Fatalf("step %d: row %s does not inject %s: %v", i, st.row.ID, st.service, cycleError(steps))
		}
		if !slices.Contains(plugins[st.provider.ID].provide, st.service) {
			t.Fatalf("step %d: row %s does not provide %s: %v", i, st.provider.ID, st.service, cycleError(steps))
		}
		next := steps[(i+1)%len(steps)].row.ID
		if st.provider.ID != next {
			t.Fatalf("step %d: provider %s is not the next row %s: %v", i, st.provider.ID, next, cycleError(steps))
		}
	}
}

// The incremental check Mount uses (a two-sided search from the new row) agrees with
// the whole-profile check Compose uses, on random graphs, and both report real paths.
func TestIncrementalCycleCheckAgreesWithFullCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(k int) Keys {
		var out Keys
		for range rng.IntN(3) {
			s := NewKey[int](fmt.Sprintf("s%d", rng.IntN(k)))
			if !slices.Contains(out, AnyKey(s)) {
				out = append(out, s)
			}
		}
		return out
	}
	cycles := 0
	for round := range 300 {
		n, k := 2+rng.IntN(14), 1+rng.IntN(10)
		var plugins []Plugin
		for i := range n {
			plugins = append(plugins, Plugin{Name: fmt.Sprintf("p%d", i), Inject: pick(k), Provide: pick(k),
				apply: func(*Activation, any) error { return nil }})
		}
		cat, err := NewCatalog(plugins...)
		if err != nil {
			t.Fatal(err)
		}
		byRow := map[string]*Plugin{}
		rt := NewRuntime(cat, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		for _, i := range rng.Perm(n) {
			p, _ := cat.lookup(fmt.Sprintf("p%d", i))
			row := Row{ID: fmt.Sprintf("r%d", i), Plugin: p.Name}
			byRow[row.ID] = p
			if slices.ContainsFunc(p.inject, p.provides) {
				continue // a self-cycle: Mount refuses such a row before it exists
			}
			var eligible []preparedRow
			for _, f := range rt.order {
				if f.state != StateFailed {
					eligible = append(eligible, preparedRow{row: f.row, plugin: f.plugin})
				}
			}
			eligible = append(eligible, preparedRow{row: row, plugin: p})
			want := findCyclePath(eligible)

			rt.mu.Lock()
			f := rt.newFiberLocked(preparedRow{row: row, plugin: p})
			rt.order = append(rt.order, f)
			rt.mu.Unlock()
			got := rt.cyclePathFrom(f)
			if (got == nil) != (want == nil) {
				t.Fatalf("round %d, mounting %s: incremental %v, full %v", round, row.ID, cycleError(got), cycleError(want))
			}
			if got != nil {
				cycles++
				checkCycle(t, got, byRow)
				checkCycle(t, want, byRow)
				if got[0].row.ID != row.ID {
					t.Fatalf("the path does not start at the new row: %v", cycleError(got))
				}
				rt.fail(f, cycleError(got))
			}
		}
	}
	if cycles < 50 {
		t.Fatalf("only %d cycles in 300 rounds: the test exercises too little", cycles)
	}
}
