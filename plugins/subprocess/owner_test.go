package subprocess_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
)

// leaveBehind is a script that starts processes that outlive it, in each way a command
// can — `cmd &` under nohup, a subshell's `( cmd & )`, one that ignores SIGTERM and,
// with escapes, a setsid daemon (which only a cgroup reaches) — records their pids in
// pids, and exits 0.
func leaveBehind(pids string, escapes bool) string {
	script := `nohup sleep 300 >/dev/null 2>&1 & echo $! >> ` + pids + `
( sleep 300 </dev/null >/dev/null 2>&1 & echo $! >> ` + pids + ` )
bash -c 'trap "" TERM; echo $$ >> ` + pids + `; while :; do sleep 0.05; done' </dev/null >/dev/null 2>&1 &
`
	n := 3
	if escapes {
		script += `setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! >> ` + pids + "\n"
		n++
	}
	return script + `while [ "$(wc -l < ` + pids + ` 2>/dev/null)" != ` + strconv.Itoa(n) + ` ]; do sleep 0.01; done
echo ready`
}

// A tree spawned with EndWithLeader settles only once nothing of it is left: what its
// leader left running is killed when it exits (SIGKILL for what ignores SIGTERM), and
// its exit stays the leader's own.
func TestEndWithLeaderLeavesNothing(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		pids := filepath.Join(t.TempDir(), "pids")
		spec := bashSpec(leaveBehind(pids, sup.UsesCgroups()))
		spec.GraceMs = 300
		spec.EndWithLeader = true
		p := spawn(t, sup, spec)
		t.Cleanup(func() { proctest.KillPids(proctest.ReadPids(pids)...) })
		ex := proctest.AwaitExit(t, p, 10*time.Second)
		if got := proctest.ReadPids(pids); len(got) < 3 || !proctest.AllGone(got...) {
			t.Fatalf("left running after the process settled: %v of %v", proctest.Leftovers(), got)
		}
		if proctest.Code(ex) != 0 || ex.State() != proc.Completed || p.Stdout().Output().Text != "ready\n" {
			t.Fatalf("exit %+v, stdout %q", ex, p.Stdout().Output().Text)
		}
	})
}

// Without EndWithLeader, what a command leaves running lives on after it settles — until
// its owner ends: EndOwner kills every tree of the session, live and lingering, within
// its bounds whatever their graceMs, then runs the OnEndOwner hooks, then deletes its
// spill files. Another session's trees are untouched.
func TestEndOwnerKillsTheSessionsTrees(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		dir := t.TempDir()
		mine, theirs := filepath.Join(dir, "mine"), filepath.Join(dir, "theirs")
		t.Cleanup(func() { proctest.KillPids(append(proctest.ReadPids(mine), proctest.ReadPids(theirs)...)...) })
		left := bashSpec(leaveBehind(mine, sup.UsesCgroups()) + "; head -c 100000 /dev/zero")
		left.Owner, left.GraceMs = "s1", 60000
		left.Stdout.MaxBytes = 1000 // it spills
		done := spawn(t, sup, left)
		proctest.AwaitExit(t, done, 10*time.Second)
		spill := done.Stdout().Output().SpillPath
		if spill == "" {
			t.Fatal("no spill file")
		}
		running := bashSpec("trap '' TERM; echo $$ >> " + mine + "; echo ready; while :; do sleep 0.05; done")
		running.Owner, running.GraceMs = "s1", 60000
		live := spawn(t, sup, running)
		waitOutput(t, live, "ready")
		other := bashSpec("sleep 300 & echo $! >> " + theirs + "; echo ready")
		other.Owner = "s2"
		proctest.AwaitExit(t, spawn(t, sup, other), 10*time.Second)
		var seen []int
		sup.OnEndOwner(func(owner string) {
			if owner == "s1" && proctest.AllGone(proctest.ReadPids(mine)...) && fileExists(spill) {
				seen = append(seen, 1)
			}
		})

		start := time.Now()
		sup.EndOwner("s1")
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("EndOwner took %v", took)
		}
		if got := proctest.ReadPids(mine); len(got) < 4 || !proctest.AllGone(got...) {
			t.Fatalf("the ended session's processes left: %v of %v", proctest.Leftovers(), got)
		}
		if ex, _ := live.Exit(); ex.Reason != proc.ReasonKill {
			t.Errorf("the live command's exit: %+v", ex)
		}
		if len(seen) != 1 {
			t.Errorf("the hook ran %d times with the processes gone and the spill file kept", len(seen))
		}
		if fileExists(spill) {
			t.Errorf("the session's spill file %s outlived it", spill)
		}
		if got := proctest.ReadPids(theirs); len(got) != 1 || proctest.AllGone(got...) {
			t.Errorf("another session's process was killed: %v", got)
		}
	})
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
