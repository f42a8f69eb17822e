package subprocess

import (
	"context"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/proc"
)

// The watchdog starts in the background, but no command starts before it covers it:
// the first spawn right after New waits for the first stage to hold the pipe (a tree in
// a cgroup) or for the whole start (a tree the watchdog must be told about).
func TestFirstSpawnWaitsForTheWatchdog(t *testing.T) {
	for _, disable := range []bool{true, false} {
		s := New(Options{SpillRoot: t.TempDir(), DisableCgroups: disable})
		capture := proc.Capture{MaxBytes: 1000}
		p, err := s.Spawn(context.Background(), Spec{Argv: []string{"true"}, Stdout: capture, Stderr: capture, GraceMs: 1000})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-s.watchdogIn:
		default:
			t.Fatal("a command was spawned before the watchdog's first stage held the pipe")
		}
		if p.cg == nil {
			select {
			case <-s.watchdogUp:
			default:
				t.Fatal("a tree without a cgroup was spawned before the watchdog's start was over")
			}
			if p.watchdog == nil || p.watchdog != s.watchdog {
				t.Error("a tree without a cgroup is not known to the watchdog")
			}
		} else if disable {
			t.Fatal("a cgroup with cgroups disabled")
		}
		s.awaitWatchdog()
		if s.watchdog == nil || proctest.Gone(s.watchdog.pid) {
			t.Fatalf("no watchdog running (%+v)", s.watchdog)
		}
		proctest.AwaitExit(t, p, 10*time.Second)
		s.Close()
	}
}
