// Package containertest holds what the tests of the container and of package profile
// share: test plugins that record what they do, and assertions about a runtime.
package containertest

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
)

// Quiet is a logger that drops everything (plugin failures are expected in these tests).
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// WaitFor polls cond until it holds, failing t after d.
var WaitFor = proctest.WaitFor

// Journal records what plugins did, in order.
type Journal struct {
	mu   sync.Mutex
	list []string
}

// Add records one entry.
func (j *Journal) Add(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.list = append(j.list, fmt.Sprintf(format, args...))
}

// Take returns the entries since the last take.
func (j *Journal) Take() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := j.list
	j.list = nil
	return out
}

// Count is how many entries since the last take equal entry.
func (j *Journal) Count(entry string) int {
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

// Svc is the value test plugins provide: which row provides which service.
type Svc struct {
	Row, Name string
}

// Key is the key of a test service: the test plugins provide *Svc values.
func Key(name string) container.Key[*Svc] { return container.NewKey[*Svc](name) }

// Keys are the keys of test services.
func Keys(names ...string) container.Keys {
	out := make(container.Keys, len(names))
	for i, n := range names {
		out[i] = Key(n)
	}
	return out
}

// Config is the config of test plugins.
type Config struct {
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

// Validate refuses a negative limit.
func (c *Config) Validate() error {
	if c.Limit < 0 {
		return fmt.Errorf("limit must not be negative, got %d", c.Limit)
	}
	return nil
}

// Plug declares a test plugin: it provides Svc values for provide, records
// "apply <id>" (with the providers of its injects) and "dispose <id>" in j, honours
// config fail/panic, and hands every activation to seen (if set).
func Plug(j *Journal, name string, inject, provide []string, seen func(*container.Activation, *Config)) container.Plugin {
	return container.Define(container.Declaration[*Config]{
		Name:    name,
		Aliases: []string{"@test/" + name},
		Inject:  Keys(inject...),
		Provide: Keys(provide...),
		Config:  func() *Config { return &Config{Value: "default", Limit: 1} },
		Apply: func(a *container.Activation, cfg *Config) error {
			var from []string
			for _, s := range inject {
				v, err := container.Injected(a, Key(s))
				if err != nil {
					return err
				}
				from = append(from, v.Row)
			}
			if len(from) > 0 {
				j.Add("apply %s from %s", a.ID(), strings.Join(from, ","))
			} else {
				j.Add("apply %s", a.ID())
			}
			a.Defer(func() { j.Add("dispose %s", a.ID()) })
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
				if err := Key(s).Provide(a, &Svc{Row: a.ID(), Name: s}); err != nil {
					return err
				}
			}
			return nil
		},
	})
}

// Exclusive is p declaring services exclusive.
func Exclusive(p container.Plugin, services ...string) container.Plugin {
	p.Exclusive = Keys(services...)
	return p
}

// NewRuntime returns a runtime over a catalog of plugins, closed when t ends.
func NewRuntime(t testing.TB, plugins ...container.Plugin) *container.Runtime {
	t.Helper()
	cat, err := container.NewCatalog(plugins...)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{Logger: Quiet})
	t.Cleanup(rt.Close)
	return rt
}

// RowStatus is the status of row id, failing t when there is none.
func RowStatus(t testing.TB, rt *container.Runtime, id string) container.RowStatus {
	t.Helper()
	for _, rs := range rt.Status().Rows {
		if rs.ID == id {
			return rs
		}
	}
	t.Fatalf("no row %q in status %+v", id, rt.Status().Rows)
	return container.RowStatus{}
}

// States maps each row of rt to its state.
func States(rt *container.Runtime) map[string]container.State {
	out := map[string]container.State{}
	for _, rs := range rt.Status().Rows {
		out[rs.ID] = rs.State
	}
	return out
}

// WantState fails t unless row id is in state want.
func WantState(t testing.TB, rt *container.Runtime, id string, want container.State) {
	t.Helper()
	if got := RowStatus(t, rt, id); got.State != want {
		t.Fatalf("row %q: state %q (error %q), want %q", id, got.State, got.Error, want)
	}
}

// WantEntries fails t unless got is want.
func WantEntries(t testing.TB, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("journal:\n got  %q\n want %q", got, want)
	}
}

// MustNil fails t on err.
func MustNil(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// WantErrContains fails t unless err contains every part.
func WantErrContains(t testing.TB, err error, parts ...string) {
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

// WantTextContains fails t unless text contains every part.
func WantTextContains(t testing.TB, text string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(text, p) {
			t.Fatalf("%q does not contain %q", text, p)
		}
	}
}
