package container_test

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// quiet is a logger that drops everything (plugin failures are expected in these tests).
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// waitFor polls cond until it holds, failing t after d.
var waitFor = proctest.WaitFor

// journal records what plugins did, in order.
type journal struct {
	mu   sync.Mutex
	list []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.list = append(j.list, fmt.Sprintf(format, args...))
}

// take returns the entries since the last take.
func (j *journal) take() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := j.list
	j.list = nil
	return out
}

func (j *journal) count(entry string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, e := range j.list {
		if e == entry {
			n++
		}
	}
	return n
}

// svc is the value test plugins provide: which row provides which service.
type svc struct {
	Row, Name string
}

// key is the key of a test service: the test plugins provide *svc values.
func key(name string) container.Key[*svc] { return container.NewKey[*svc](name) }

// keys are the keys of test services.
func keys(names ...string) container.Keys {
	out := make(container.Keys, len(names))
	for i, n := range names {
		out[i] = key(n)
	}
	return out
}

// testConfig is the config of test plugins.
type testConfig struct {
	Value string `yaml:"value"`
	Fail  bool   `yaml:"fail"`
	Panic bool   `yaml:"panic"`
	Limit int    `yaml:"limit"`
	// Count and Counts have valid tags: the wording of a value of the wrong type.
	Count  float64   `yaml:"count" valid:"a positive number"`
	Counts []float64 `yaml:"counts" valid:"a list of positive numbers"`
	Inner  struct {
		A int    `yaml:"a"`
		B string `yaml:"b"`
	} `yaml:"inner"`
}

func (c *testConfig) Validate() error {
	if c.Limit < 0 {
		return fmt.Errorf("limit must not be negative, got %d", c.Limit)
	}
	return nil
}

// plug declares a test plugin: it provides svc values for provide, records
// "apply <id>" (with the providers of its injects) and "dispose <id>" in j, honours
// config fail/panic, and hands every activation to seen (if set).
func plug(j *journal, name string, inject, provide []string, seen func(*container.Activation, *testConfig)) container.Plugin {
	return container.Define(container.Declaration[*testConfig]{
		Name:    name,
		Aliases: []string{"@test/" + name},
		Inject:  keys(inject...),
		Provide: keys(provide...),
		Config:  func() *testConfig { return &testConfig{Value: "default", Limit: 1} },
		Apply: func(a *container.Activation, cfg *testConfig) error {
			var from []string
			for _, s := range inject {
				v, err := container.Injected(a, key(s))
				if err != nil {
					return err
				}
				from = append(from, v.Row)
			}
			if len(from) > 0 {
				j.add("apply %s from %s", a.ID(), strings.Join(from, ","))
			} else {
				j.add("apply %s", a.ID())
			}
			a.Defer(func() { j.add("dispose %s", a.ID()) })
			if seen != nil {
				seen(a, cfg)
			}
			if cfg.Panic {
				panic("boom from " + a.ID())
			}
			if cfg.Fail {
				return fmt.Errorf("%s refuses to start", a.ID())
			}
			for _, s := range provide {
				if err := key(s).Provide(a, &svc{Row: a.ID(), Name: s}); err != nil {
					return err
				}
			}
			return nil
		},
	})
}

// exclusive is p declaring services exclusive.
func exclusive(p container.Plugin, services ...string) container.Plugin {
	p.Exclusive = keys(services...)
	return p
}

func newRuntime(t testing.TB, plugins ...container.Plugin) *container.Runtime {
	t.Helper()
	cat, err := container.NewCatalog(plugins...)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{Logger: quiet})
	t.Cleanup(rt.Close)
	return rt
}

func rowStatus(t testing.TB, rt *container.Runtime, id string) container.RowStatus {
	t.Helper()
	for _, rs := range rt.Status().Rows {
		if rs.ID == id {
			return rs
		}
	}
	t.Fatalf("no row %q in status %+v", id, rt.Status().Rows)
	return container.RowStatus{}
}

func states(rt *container.Runtime) map[string]container.State {
	out := map[string]container.State{}
	for _, rs := range rt.Status().Rows {
		out[rs.ID] = rs.State
	}
	return out
}

func wantState(t testing.TB, rt *container.Runtime, id string, want container.State) {
	t.Helper()
	if got := rowStatus(t, rt, id); got.State != want {
		t.Fatalf("row %q: state %q (error %q), want %q", id, got.State, got.Error, want)
	}
}

func wantEntries(t testing.TB, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("journal:\n got  %q\n want %q", got, want)
	}
}

func mustNil(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErrContains(t testing.TB, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}

func wantTextContains(t testing.TB, text string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(text, p) {
			t.Fatalf("%q does not contain %q", text, p)
		}
	}
}
