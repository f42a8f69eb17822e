package container_test

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"github.com/dsh-dev/dsh/container"
)

var benchLog = slog.New(slog.DiscardHandler)

// chain builds n plugins where plugin i provides s<i> and injects s<i-1>, and the rows
// mounting them in dependency order and in reverse order.
func chain(b *testing.B, n int) (*container.Catalog, []container.Row, []container.Row) {
	b.Helper()
	plugins := make([]container.Plugin, n)
	for i := range n {
		provide := fmt.Sprintf("s%d", i)
		var inject []string
		if i > 0 {
			inject = []string{fmt.Sprintf("s%d", i-1)}
		}
		plugins[i] = container.Define(container.Declaration[container.NoConfig]{
			Name: fmt.Sprintf("p%05d", i), Provide: keys(provide), Inject: keys(inject...),
			Apply: func(a *container.Activation, _ container.NoConfig) error {
				for _, s := range inject {
					if _, err := container.Injected(a, key(s)); err != nil {
						return err
					}
				}
				return key(provide).Provide(a, &svc{Row: a.ID(), Name: provide})
			},
		})
	}
	cat, err := container.NewCatalog(plugins...)
	if err != nil {
		b.Fatal(err)
	}
	forward := make([]container.Row, n)
	for i := range n {
		forward[i] = container.Row{ID: fmt.Sprintf("r%05d", i), Plugin: fmt.Sprintf("p%05d", i)}
	}
	reverse := slices.Clone(forward)
	slices.Reverse(reverse)
	return cat, forward, reverse
}

func checkAllActive(b *testing.B, rt *container.Runtime, n int) {
	b.Helper()
	st := rt.Status()
	if len(st.Rows) != n {
		b.Fatalf("%d rows, want %d", len(st.Rows), n)
	}
	for _, rs := range st.Rows {
		if rs.State != container.StateActive {
			b.Fatalf("row %s is %s (%s)", rs.ID, rs.State, rs.Error)
		}
	}
}

// perRow times measure on a fresh runtime per iteration (prepare and check untimed; either
// may be nil) and reports ns/row for n rows.
func perRow(b *testing.B, cat *container.Catalog, n int, prepare, measure, check func(*testing.B, *container.Runtime)) {
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		rt := container.NewRuntime(cat, container.Options{Logger: benchLog})
		if prepare != nil {
			prepare(b, rt)
		}
		b.StartTimer()
		measure(b, rt)
		b.StopTimer()
		if check != nil {
			check(b, rt)
		}
		rt.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
}

// BenchmarkComposeChain: Compose a profile of n rows whose inject chain is n deep, in
// dependency order and reversed. Linear cost means ns/row stays flat across n.
func BenchmarkComposeChain(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		cat, forward, reverse := chain(b, n)
		// The floor: the irreducible work of any registry of n services in a chain (one
		// map insert and one lookup per row), for the ratio runtime/floor.
		b.Run(fmt.Sprintf("rows=%d/floor", n), func(b *testing.B) {
			names := make([]string, n)
			for i := range n {
				names[i] = fmt.Sprintf("s%d", i)
			}
			b.ReportAllocs()
			for b.Loop() {
				services := map[string]any{}
				for i := range n {
					if i > 0 {
						if _, ok := services[names[i-1]]; !ok {
							b.Fatal("chain broken")
						}
					}
					services[names[i]] = &svc{Name: names[i]}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
		})
		for _, order := range []struct {
			name string
			rows []container.Row
		}{{"forward", forward}, {"reverse", reverse}} {
			compose := func(b *testing.B, rt *container.Runtime) {
				if err := rt.Compose("bench", order.rows); err != nil {
					b.Fatal(err)
				}
			}
			allActive := func(b *testing.B, rt *container.Runtime) { checkAllActive(b, rt, n) }
			b.Run(fmt.Sprintf("rows=%d/%s/compose", n, order.name), func(b *testing.B) {
				perRow(b, cat, n, nil, compose, allActive)
			})
			// Removing every row through Compose (a reload to an empty profile): the
			// diff's dispose path.
			b.Run(fmt.Sprintf("rows=%d/%s/compose-remove-all", n, order.name), func(b *testing.B) {
				perRow(b, cat, n, compose, func(b *testing.B, rt *container.Runtime) {
					if err := rt.Compose("bench", nil); err != nil {
						b.Fatal(err)
					}
				}, func(b *testing.B, rt *container.Runtime) {
					if len(rt.Status().Rows) != 0 {
						b.Fatal("rows left")
					}
				})
			})
			b.Run(fmt.Sprintf("rows=%d/%s/close", n, order.name), func(b *testing.B) {
				perRow(b, cat, n, compose, func(_ *testing.B, rt *container.Runtime) { rt.Close() }, nil)
			})
		}
	}
}

// BenchmarkSwapProvider: replace the provider of one service (the row keeps its id,
// the plugin changes) under 100 dependents, which unload and re-apply.
func BenchmarkSwapProvider(b *testing.B) {
	const deps = 100
	provide := func(name string) container.Plugin {
		return container.Define(container.Declaration[container.NoConfig]{Name: name, Provide: keys("shell"), Apply: func(a *container.Activation, _ container.NoConfig) error {
			return key("shell").Provide(a, &svc{Row: a.ID(), Name: name})
		}})
	}
	dep := container.Define(container.Declaration[container.NoConfig]{Name: "dep", Inject: keys("shell"), Apply: func(a *container.Activation, _ container.NoConfig) error {
		_, err := container.Injected(a, key("shell"))
		a.Defer(func() {})
		return err
	}})
	cat, err := container.NewCatalog(provide("local"), provide("sandbox"), dep)
	if err != nil {
		b.Fatal(err)
	}
	rows := func(executor string) []container.Row {
		out := []container.Row{{ID: "bash", Plugin: executor}}
		for i := range deps {
			out = append(out, container.Row{ID: fmt.Sprintf("d%03d", i), Plugin: "dep"})
		}
		return out
	}
	local, sandbox := rows("local"), rows("sandbox")
	rt := container.NewRuntime(cat, container.Options{Logger: benchLog})
	defer rt.Close()
	if err := rt.Compose("bench", local); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		next := sandbox
		if i%2 == 1 {
			next = local
		}
		i++
		if err := rt.Compose("bench", next); err != nil {
			b.Fatal(err)
		}
	}
	checkAllActive(b, rt, deps+1)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*deps), "ns/dependent")
}
