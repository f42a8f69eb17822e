package subprocess_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/subprocess"
)

// EndTree ends what a leader left running — a background child, one that left the
// process group — once the process settled, and keeps the leader's exit.
func TestEndTreeEndsWhatTheLeaderLeft(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		pidFile := filepath.Join(t.TempDir(), "pid")
		p := spawn(t, sup, bashSpec("sleep 300 >/dev/null 2>&1 & echo $! > "+proctest.Quote(pidFile)+"; exit 3"))
		pid := readPid(t, pidFile)
		p.EndTree()
		if ex, _ := p.Exit(); ex.Code == nil || *ex.Code != 3 {
			t.Fatalf("exit %+v, want the leader's code 3", ex)
		}
		if !proctest.Until(5*time.Second, func() bool { return proctest.Gone(pid) }) {
			t.Fatalf("the background child %d outlived EndTree", pid)
		}
		p.EndTree() // again: nothing left, returns at once
	})
}

// A process whose tree is gone by itself: EndTree returns once it settled.
func TestEndTreeOnAFinishedTree(t *testing.T) {
	sup := newSup(t, false)
	p := spawn(t, sup, bashSpec("exit 0"))
	done := make(chan struct{})
	go func() { p.EndTree(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("EndTree did not return")
	}
}
