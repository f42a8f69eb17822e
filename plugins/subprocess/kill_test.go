package subprocess_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
)

// A process that traps SIGTERM gets SIGTERM first, then SIGKILL after the grace period.
func TestKillEscalatesToSIGKILLAfterGrace(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		p := spawn(t, sup, bashSpec(`trap 'echo got-term' TERM; echo ready; while :; do sleep 0.05; done`))
		waitOutput(t, p, "ready\n")
		if p.State() != proc.Running {
			t.Fatalf("state %v before Kill", p.State())
		}
		start := time.Now()
		if !p.Kill() {
			t.Fatal("Kill() = false on a running process")
		}
		if !p.Kill() {
			t.Error("a second Kill() while the tree is dying = false")
		}
		ex := proctest.AwaitExit(t, p, 10*time.Second)
		if took := time.Since(start); took < 900*time.Millisecond {
			t.Errorf("settled %v after Kill; the trap should have held it for the 1s grace", took)
		}
		if ex.Signal != "SIGKILL" || ex.Code != nil || ex.Reason != proc.ReasonKill || !errors.Is(ex.Cause, subprocess.ErrKilled) {
			t.Errorf("exit = %+v; want SIGKILL, no code, reason kill", ex)
		}
		if !strings.Contains(p.Stdout().Output().Text, "got-term") {
			t.Errorf("stdout %q: SIGTERM was not delivered first", p.Stdout().Output().Text)
		}
		if p.State() != proc.Killed {
			t.Errorf("state %v", p.State())
		}
		if p.Kill() {
			t.Error("Kill() = true after the process settled")
		}
		if !proctest.Gone(p.Pid()) {
			t.Errorf("pid %d still alive", p.Pid())
		}
	})
}

// SIGKILL reaches the group after the grace period even when the leader already exited.
func TestEscalationReachesGroupAfterLeaderExit(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		pidFile := filepath.Join(t.TempDir(), "pids")
		// The leader dies on SIGTERM; the child ignores it (ignored signals survive exec).
		p := spawn(t, sup, bashSpec(`(trap "" TERM; echo $BASHPID > `+pidFile+`; exec sleep 300) & wait`))
		var child []int
		proctest.WaitFor(t, 10*time.Second, "the child to ignore TERM", func() bool {
			child = proctest.ReadPids(pidFile)
			return len(child) == 1
		})
		t.Cleanup(func() { proctest.KillPids(child...) })
		p.Kill()
		ex := proctest.AwaitExit(t, p, 10*time.Second)
		if ex.Signal != "SIGTERM" || ex.Reason != proc.ReasonKill {
			t.Errorf("exit = %+v; want the leader ended by SIGTERM", ex)
		}
		proctest.WaitFor(t, 5*time.Second, "the TERM-ignoring child to die", func() bool { return proctest.Gone(child[0]) })
	})
}

// Kill after the leader exited by itself (an orphan still holds the pipes) ends the rest
// of the tree, and the exit status stays the leader's own.
func TestKillDuringDrainKeepsLeaderStatus(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		gate := filepath.Join(t.TempDir(), "gate")
		spec := bashSpec(`(trap "" TERM; echo $BASHPID; touch ` + gate + `; exec sleep 300) & while [ ! -e ` + gate + ` ]; do sleep 0.01; done; exit 7`)
		spec.GraceMs = 1500
		p := spawn(t, sup, spec)
		waitOutput(t, p, "\n") // the child prints its pid once TERM is ignored
		child, _ := strconv.Atoi(strings.TrimSpace(p.Stdout().Output().Text))
		t.Cleanup(func() { proctest.KillPids(child) })
		proctest.WaitFor(t, 5*time.Second, "the leader to exit", func() bool { return proctest.Gone(p.Pid()) })
		if !p.Kill() {
			t.Error("Kill() = false while the output was still draining")
		}
		ex := proctest.AwaitExit(t, p, 10*time.Second)
		if proctest.Code(ex) != 7 || ex.Signal != "" || ex.Reason != proc.ReasonNone || p.State() != proc.Completed {
			t.Errorf("exit = %+v state %v; want the leader's own exit 7", ex, p.State())
		}
		proctest.WaitFor(t, 5*time.Second, "the orphan to die", func() bool { return proctest.Gone(child) })
	})
}

// After the leader exits, the pipes get at most graceMs to drain: an orphan holding
// stdout cannot keep the process unsettled. Closing the supervisor ends the orphan.
func TestDrainIsBoundedAfterLeaderExit(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		pidFile := filepath.Join(t.TempDir(), "pid")
		spec := bashSpec(`(sleep 300 & echo $! > ` + pidFile + `); echo done`)
		spec.GraceMs = 500
		p := spawn(t, sup, spec)
		// The bound counts from the leader's exit (seen here a little later, if anything),
		// so a slow start of the command does not count against it.
		proctest.WaitFor(t, 10*time.Second, "the leader to exit", func() bool { return proctest.Gone(p.Pid()) })
		exited := time.Now()
		ex := proctest.AwaitExit(t, p, 10*time.Second)
		took := time.Since(exited)
		if proctest.Code(ex) != 0 || p.Stdout().Output().Text != "done\n" {
			t.Errorf("exit %+v stdout %q", ex, p.Stdout().Output().Text)
		}
		if took > 500*time.Millisecond+time.Second {
			t.Errorf("settled %v after the leader's exit, want within grace (500ms)", took)
		}
		orphan := proctest.ReadPids(pidFile)
		if len(orphan) != 1 || proctest.Gone(orphan[0]) {
			t.Fatalf("orphan %v should still run after a normal exit", orphan)
		}
		sup.Close()
		proctest.WaitFor(t, 5*time.Second, "Close to end the orphan", func() bool { return proctest.Gone(orphan[0]) })
	})
}

func TestDeadlineAbortAndSelfKill(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		t.Run("deadline", func(t *testing.T) {
			spec := bashSpec("sleep 60")
			spec.Deadline = time.Now().Add(200 * time.Millisecond)
			ex := proctest.AwaitExit(t, spawn(t, sup, spec), 10*time.Second)
			if ex.Reason != proc.ReasonTimeout || !errors.Is(ex.Cause, subprocess.ErrTimedOut) || ex.Signal != "SIGTERM" {
				t.Errorf("exit = %+v", ex)
			}
		})
		t.Run("abort", func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			p, err := sup.Spawn(ctx, bashSpec("echo ready; sleep 60"))
			if err != nil {
				t.Fatal(err)
			}
			waitOutput(t, p, "ready")
			stop := errors.New("stop")
			cancel(stop)
			ex := proctest.AwaitExit(t, p, 10*time.Second)
			if ex.Reason != proc.ReasonAbort || !errors.Is(ex.Cause, stop) || ex.Signal != "SIGTERM" {
				t.Errorf("exit = %+v", ex)
			}
		})
		t.Run("abort after deadline keeps timeout", func(t *testing.T) {
			// Only a deadline that fires once bash has set its trap shows the sequence; if
			// it fired first (a slow start: no "ready", bash died of the SIGTERM), the run
			// says nothing and is retried with a later deadline.
			for _, after := range []time.Duration{100 * time.Millisecond, time.Second, 5 * time.Second} {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				spec := bashSpec(`trap 'echo term' TERM; echo ready; while :; do sleep 0.05; done`)
				spec.Deadline = time.Now().Add(after)
				p, err := sup.Spawn(ctx, spec)
				if err != nil {
					t.Fatal(err)
				}
				proctest.WaitFor(t, 20*time.Second, "the trap to run, or the end", func() bool {
					return strings.Contains(p.Stdout().Output().Text, "term") || p.State() != proc.Running
				})
				if !strings.Contains(p.Stdout().Output().Text, "term") {
					ex := proctest.AwaitExit(t, p, 10*time.Second)
					if strings.Contains(p.Stdout().Output().Text, "ready") {
						t.Fatalf("the trap was set but never ran: exit %+v", ex)
					}
					t.Logf("the deadline (%v) fired before bash set its trap; retrying", after)
					continue
				}
				cancel()
				ex := proctest.AwaitExit(t, p, 10*time.Second)
				if ex.Reason != proc.ReasonTimeout || ex.Signal != "SIGKILL" {
					t.Errorf("exit = %+v; want the first cause (timeout), ended by SIGKILL", ex)
				}
				return
			}
			t.Fatal("bash never set its trap before the deadline")
		})
		t.Run("self kill", func(t *testing.T) {
			spec := bashSpec("kill -TERM $$")
			spec.Deadline = time.Now().Add(time.Minute)
			ex := proctest.AwaitExit(t, spawn(t, sup, spec), 10*time.Second)
			if ex.Reason != proc.ReasonNone || ex.Signal != "SIGTERM" || ex.Code != nil || ex.State() != proc.Killed {
				t.Errorf("exit = %+v", ex)
			}
		})
		t.Run("normal exit disarms the deadline", func(t *testing.T) {
			spec := bashSpec("exit 3")
			spec.Deadline = time.Now().Add(time.Minute)
			ex := proctest.AwaitExit(t, spawn(t, sup, spec), 10*time.Second)
			if proctest.Code(ex) != 3 || ex.Reason != proc.ReasonNone || ex.State() != proc.Completed {
				t.Errorf("exit = %+v", ex)
			}
		})
	})
}

func TestIsolationModes(t *testing.T) {
	proctest.NoLeftovers(t)
	off := newSup(t, true)
	if got := off.Isolation(); got != "process group only (cgroups disabled by configuration)" {
		t.Errorf("Isolation() = %q", got)
	}
	if off.UsesCgroups() {
		t.Error("UsesCgroups() with cgroups disabled")
	}
	p := spawn(t, off, bashSpec("true"))
	proctest.AwaitExit(t, p, 10*time.Second)
	if p.Cgroup() != "" {
		t.Errorf("Cgroup() = %q in process-group mode", p.Cgroup())
	}

	on := subprocess.New(subprocess.Options{SpillRoot: t.TempDir()})
	defer on.Close()
	t.Logf("isolation on this host: %s", on.Isolation())
	if !on.UsesCgroups() {
		if !strings.HasPrefix(on.Isolation(), "process group only (") {
			t.Errorf("Isolation() = %q", on.Isolation())
		}
		t.Skip("cgroup v2 is not writable here")
	}
	root, ok := strings.CutPrefix(on.Isolation(), "cgroup v2 at ")
	if !ok || !strings.HasPrefix(filepath.Base(root), "dsh-"+strconv.Itoa(os.Getpid())+"-") {
		t.Fatalf("Isolation() = %q", on.Isolation())
	}
	p = spawn(t, on, bashSpec("cat /proc/self/cgroup; echo ready; sleep 60"))
	waitOutput(t, p, "ready")
	cg := p.Cgroup()
	if filepath.Dir(cg) != root {
		t.Errorf("Cgroup() = %q, want a child of %q", cg, root)
	}
	if _, err := os.Stat(filepath.Join(cg, "cgroup.procs")); err != nil {
		t.Errorf("cgroup dir: %v", err)
	}
	procs, _ := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
	if !strings.Contains(string(procs), strconv.Itoa(p.Pid())) {
		t.Errorf("pid %d not in %s/cgroup.procs: %q", p.Pid(), cg, procs)
	}
	p.Kill()
	proctest.AwaitExit(t, p, 10*time.Second)
	// The emptied cgroup is kept for reuse (or removed); either way no process is left.
	if procs, err := os.ReadFile(filepath.Join(cg, "cgroup.procs")); err == nil && len(procs) != 0 {
		t.Errorf("cgroup %s still has processes: %q", cg, procs)
	}
	q := spawn(t, on, bashSpec("true"))
	proctest.AwaitExit(t, q, 10*time.Second)
	if q.Cgroup() != cg {
		t.Logf("the next command got cgroup %s (recycled: %v)", q.Cgroup(), q.Cgroup() == cg)
	}
	on.Close()
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("harness cgroup %s not removed on Close: %v", root, err)
	}
}

// Close kills every live tree and settles it as killed (SIGKILL for a TERM trapper),
// leaves finished processes untouched, and refuses new spawns.
func TestCloseKillsLiveTreesAndKeepsFinished(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		finished := spawn(t, sup, bashSpec("echo hi; exit 4"))
		before := proctest.AwaitExit(t, finished, 10*time.Second)
		trapper := spawn(t, sup, bashSpec(`trap 'echo term' TERM; echo ready; while :; do sleep 0.05; done`))
		sleeper := spawn(t, sup, bashSpec("echo ready; sleep 300"))
		waitOutput(t, trapper, "ready")
		waitOutput(t, sleeper, "ready")

		sup.Close()
		sup.Close() // idempotent
		for _, p := range []*subprocess.Process{trapper, sleeper} {
			select {
			case <-p.Done():
			default:
				t.Fatalf("Close returned before pid %d settled", p.Pid())
			}
			if !proctest.Gone(p.Pid()) {
				t.Errorf("pid %d alive after Close", p.Pid())
			}
		}
		if ex, _ := trapper.Exit(); ex.Signal != "SIGKILL" || ex.Reason != proc.ReasonDispose || !errors.Is(ex.Cause, subprocess.ErrDisposed) || trapper.State() != proc.Killed {
			t.Errorf("trapper exit = %+v", ex)
		}
		if ex, _ := sleeper.Exit(); ex.Signal != "SIGTERM" || ex.Reason != proc.ReasonDispose || sleeper.State() != proc.Killed {
			t.Errorf("sleeper exit = %+v", ex)
		}
		after, _ := finished.Exit()
		if proctest.Code(after) != 4 || after.Reason != proc.ReasonNone || proctest.Code(before) != 4 || finished.State() != proc.Completed || finished.Stdout().Output().Text != "hi\n" {
			t.Errorf("finished process changed: %+v", after)
		}
		if _, err := sup.Spawn(context.Background(), bashSpec("true")); !errors.Is(err, subprocess.ErrDisposed) {
			t.Errorf("Spawn after Close: %v", err)
		}
	})
}

// Spawns racing with Close either fail with ErrDisposed or are killed and settled.
func TestSpawnRacingClose(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		results := make(chan *subprocess.Process, 40)
		errs := make(chan error, 40)
		for i := 0; i < 40; i++ {
			go func() {
				p, err := sup.Spawn(context.Background(), bashSpec("sleep 300"))
				if err != nil {
					errs <- err
					return
				}
				results <- p
			}()
		}
		// Let some spawns through before closing.
		proctest.WaitFor(t, 10*time.Second, "a first spawn", func() bool { return len(results) > 0 })
		sup.Close()
		for i := 0; i < 40; i++ {
			select {
			case p := <-results:
				select {
				case <-p.Done():
				case <-time.After(10 * time.Second):
					t.Fatalf("pid %d spawned around Close never settled", p.Pid())
				}
				if p.State() != proc.Killed {
					t.Errorf("pid %d state %v", p.Pid(), p.State())
				}
			case err := <-errs:
				if !errors.Is(err, subprocess.ErrDisposed) {
					t.Errorf("spawn error %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("a spawn never returned")
			}
		}
	})
}

// When the drain bound passes, bytes already in the pipe are still taken: a reader
// scheduled late (a loaded machine) never loses what the command wrote before it
// exited. With a 1 ms grace the deadline passes before the reader is done almost
// every time.
func TestDrainDeadlineKeepsBufferedOutput(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		for i := 0; i < 20; i++ {
			// The orphan holds stdout open, so no EOF comes: only the deadline ends the read.
			spec := bashSpec(`(exec sleep 30 &); head -c 60000 /dev/zero | tr '\0' a; printf end`)
			spec.GraceMs = 1
			p := spawn(t, sup, spec)
			proctest.AwaitExit(t, p, 10*time.Second)
			if out := p.Stdout().Output(); out.Bytes != 60003 || !strings.HasSuffix(out.Text, "aend") {
				t.Fatalf("run %d: %d bytes captured, want 60003", i, out.Bytes)
			}
		}
	})
}

// A cgroup that received cgroup.kill is never handed to a new command: on Linux 6.18 a
// process cloned into such a cgroup is SIGKILLed at once.
func TestCommandsAfterACgroupKillRunNormally(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		for round := 0; round < 3; round++ {
			spec := bashSpec(`trap '' TERM; echo ready; while :; do sleep 0.05; done`)
			spec.GraceMs = 50
			p := spawn(t, sup, spec)
			waitOutput(t, p, "ready")
			p.Kill()
			if ex := proctest.AwaitExit(t, p, 10*time.Second); ex.Signal != "SIGKILL" {
				t.Fatalf("exit %+v", ex)
			}
			for i := 0; i < 5; i++ {
				q := spawn(t, sup, bashSpec("exit 0"))
				if ex := proctest.AwaitExit(t, q, 10*time.Second); proctest.Code(ex) != 0 || ex.Signal != "" {
					t.Fatalf("round %d: a command after a kill ended %+v (cgroup %s)", round, ex, q.Cgroup())
				}
			}
		}
	})
}

// In cgroup mode a daemon that left the process group gets SIGTERM with the group
// (it may shut down cleanly) and SIGKILL after the grace period if it ignores it.
func TestCgroupKillReachesEscapedDaemons(t *testing.T) {
	proctest.NoLeftovers(t)
	sup := newSup(t, false)
	if !sup.UsesCgroups() {
		t.Skipf("cgroup isolation unavailable: %s", sup.Isolation())
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	spec := bashSpec(`
setsid bash -c 'trap "echo polite-term >> ` + log + `; exit 0" TERM; echo $$ >> ` + log + `.pids; while :; do sleep 0.05; done' </dev/null >/dev/null 2>&1 &
setsid bash -c 'trap "" TERM; echo $$ >> ` + log + `.pids; exec sleep 300' </dev/null >/dev/null 2>&1 &
while [ "$(wc -l < ` + log + `.pids 2>/dev/null)" != 2 ]; do sleep 0.01; done
echo ready; sleep 300`)
	spec.GraceMs = 1500
	p := spawn(t, sup, spec)
	waitOutput(t, p, "ready")
	pids := proctest.ReadPids(log + ".pids")
	t.Cleanup(func() { proctest.KillPids(pids...) })
	p.Kill()
	proctest.WaitFor(t, 5*time.Second, "the polite daemon to handle SIGTERM", func() bool {
		data, _ := os.ReadFile(log)
		return strings.Contains(string(data), "polite-term")
	})
	proctest.AwaitExit(t, p, 10*time.Second)
	proctest.WaitFor(t, 5*time.Second, "both daemons to be gone", func() bool { return proctest.AllGone(pids...) })
}

// A cgroup directory left by a harness that died is removed by the next one.
func TestStaleCgroupsAreRemoved(t *testing.T) {
	probe := subprocess.New(subprocess.Options{SpillRoot: t.TempDir()})
	root, ok := strings.CutPrefix(probe.Isolation(), "cgroup v2 at ")
	probe.Close()
	if !ok {
		t.Skipf("cgroup isolation unavailable: %s", probe.Isolation())
	}
	stale := filepath.Join(filepath.Dir(root), fmt.Sprintf("dsh-%d-deadbeef", deadPid(t)))
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(stale, "c1"), 0o755)
	sup := subprocess.New(subprocess.Options{SpillRoot: t.TempDir()})
	defer sup.Close()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		os.Remove(filepath.Join(stale, "c1"))
		os.Remove(stale)
		t.Errorf("stale cgroup %s kept: %v", stale, err)
	}
}

// A Kill that comes after the leader exited but before its waiter told the teardown
// (held here) still ends only the rest of the tree: the status is the leader's own.
func TestKillBeforeTheExitIsReportedKeepsLeaderStatus(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		release := make(chan struct{})
		subprocess.HoldExitReports(t, release)
		spec := bashSpec(`(trap "" TERM; echo $BASHPID; exec sleep 300) & exit 7`)
		spec.GraceMs = 1500
		p := spawn(t, sup, spec)
		waitOutput(t, p, "\n")
		child, _ := strconv.Atoi(strings.TrimSpace(p.Stdout().Output().Text))
		t.Cleanup(func() { proctest.KillPids(child) })
		proctest.WaitFor(t, 5*time.Second, "the leader to exit", func() bool { return proctest.Gone(p.Pid()) })
		if !p.Kill() {
			t.Error("Kill() = false while the output was still draining")
		}
		close(release)
		ex := proctest.AwaitExit(t, p, 10*time.Second)
		if proctest.Code(ex) != 7 || ex.Signal != "" || ex.Reason != proc.ReasonNone || p.State() != proc.Completed {
			t.Errorf("exit = %+v state %v; want the leader's own exit 7", ex, p.State())
		}
		proctest.WaitFor(t, 5*time.Second, "the orphan to die", func() bool { return proctest.Gone(child) })
	})
}
