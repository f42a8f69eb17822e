package container

import (
	"fmt"
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

// The whole-profile check Compose uses finds a cycle exactly when there is one (a row
// that reaches itself through inject → provider edges, found by brute force), on random
// graphs, and reports a real path.
func TestCycleCheckAgreesWithReachability(t *testing.T) {
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
		var rows []preparedRow
		for _, i := range rng.Perm(n) {
			p, _ := cat.lookup(fmt.Sprintf("p%d", i))
			row := Row{ID: fmt.Sprintf("r%d", i), Plugin: p.Name}
			byRow[row.ID] = p
			rows = append(rows, preparedRow{row: row, plugin: p})
		}
		got := findCyclePath(rows)
		if want := hasCycle(rows); (got != nil) != want {
			t.Fatalf("round %d: found %v, a cycle exists: %v", round, cycleError(got), want)
		}
		if got != nil {
			cycles++
			checkCycle(t, got, byRow)
		}
	}
	if cycles < 50 {
		t.Fatalf("only %d cycles in 300 rounds: the test exercises too little", cycles)
	}
}

// hasCycle reports whether a row reaches itself through inject → provider edges: the
// transitive closure of the edge relation, computed naively.
func hasCycle(rows []preparedRow) bool {
	n := len(rows)
	reach := make([][]bool, n)
	for i, a := range rows {
		reach[i] = make([]bool, n)
		for j, b := range rows {
			reach[i][j] = slices.ContainsFunc(a.plugin.inject, b.plugin.provides)
		}
	}
	for m := range n {
		for i := range n {
			for j := range n {
				reach[i][j] = reach[i][j] || reach[i][m] && reach[m][j]
			}
		}
	}
	for i := range n {
		if reach[i][i] {
			return true
		}
	}
	return false
}
