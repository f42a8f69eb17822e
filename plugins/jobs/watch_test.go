package jobs_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/jobs"
)

// scope is a container.Scope whose disposers run when end is called.
type scope struct {
	mu   sync.Mutex
	defs []func()
}

func (s *scope) Defer(fn func())          { s.mu.Lock(); s.defs = append(s.defs, fn); s.mu.Unlock() }
func (s *scope) Context() context.Context { return context.Background() }
func (s *scope) end() {
	s.mu.Lock()
	defs := s.defs
	s.mu.Unlock()
	for i := len(defs) - 1; i >= 0; i-- {
		defs[i]()
	}
}

// A watcher is told about each start and finish, with the job's state then; a panic
// is contained; the watch ends with its scope.
func TestWatchStartsAndFinishes(t *testing.T) {
	rt := newRuntime(t, jobs.Options{})
	var seen proctest.Record
	sc := &scope{}
	if err := rt.Watch(sc, func(c jobs.Change, j jobs.Snapshot) {
		seen.Add(fmt.Sprintf("%s %s %s %s %s", c, j.ID, j.Owner, j.Status, j.Detail))
	}); err != nil {
		t.Fatal(err)
	}
	fragile := &scope{}
	_ = rt.Watch(fragile, func(jobs.Change, jobs.Snapshot) { panic("watcher bug") })
	s, _ := session("s1")
	w, snap := start(t, rt, "bash", "sleep 1", s)
	w.finish(jobs.Outcome{Status: jobs.StatusCompleted, Detail: "exit code: 0"})
	if _, err := rt.Wait(context.Background(), s, snap.ID, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	want := []string{"started bash-1 s1 running ", "finished bash-1 s1 completed exit code: 0"}
	if !proctest.Until(5*time.Second, func() bool { return len(seen.All()) == 2 }) || fmt.Sprint(seen.All()) != fmt.Sprint(want) {
		t.Fatalf("seen %q, want %q", seen.All(), want)
	}
	sc.end()
	fragile.end()
	w2, snap2 := start(t, rt, "bash", "sleep 2", s)
	w2.finish(jobs.Outcome{Status: jobs.StatusKilled, Detail: "signal: SIGTERM"})
	if _, err := rt.Wait(context.Background(), s, snap2.ID, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if len(seen.All()) != 2 {
		t.Fatalf("a watcher whose scope ended was told: %q", seen.All())
	}
	if err := rt.Watch(sc, nil); err == nil {
		t.Fatal("a nil watcher was added")
	}
}
