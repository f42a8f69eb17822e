package subprocess_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
)

// The group id of a tree is its leader's pid. The Supervisor signals the group by number
// (kill(-pgid)) after the leader exited — the SIGKILL escalation, Close ending trees left
// behind — which is safe only while the id cannot be reused. These tests check that the
// leader stays an unreaped zombie (which keeps the id allocated) for as long as the
// Supervisor may signal its group, and is reaped afterwards.

// zombieChild reports whether pid is an unreaped zombie child of this process.
func zombieChild(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return false
	}
	f := strings.Fields(string(data[i+2:]))
	return len(f) > 1 && f[0] == "Z" && f[1] == strconv.Itoa(os.Getpid())
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

var readPid = proctest.WaitPidFile

// escalation is a killed tree whose leader died on SIGTERM while a member ignores it:
// the SIGKILL escalation is pending, the member holds the tree alive until gate exists.
type escalation struct {
	p        *subprocess.Process
	member   int
	gate     string
	killedAt time.Time
}

// escalationScenario spawns such a tree, kills it and returns once the leader is dead
// (a zombie: the Supervisor has not reaped it) and the member runs on.
func escalationScenario(t *testing.T, sup *subprocess.Supervisor, graceMs int64) escalation {
	t.Helper()
	dir := t.TempDir()
	pidFile, gate := filepath.Join(dir, "member"), filepath.Join(dir, "gate")
	spec := bashSpec(`(trap "" TERM; exec >/dev/null 2>&1 </dev/null; echo $BASHPID > ` + pidFile +
		`; while [ ! -e ` + gate + ` ]; do sleep 0.01; done) & wait`)
	spec.GraceMs = graceMs
	p := spawn(t, sup, spec)
	member := readPid(t, pidFile)
	t.Cleanup(func() { proctest.KillPids(member) })
	killedAt := time.Now()
	p.Kill()
	proctest.WaitFor(t, 10*time.Second, "the leader to die", func() bool { return proctest.Gone(p.Pid()) })
	return escalation{p: p, member: member, gate: gate, killedAt: killedAt}
}

// A killed tree whose member outlived the leader: while the member runs, the leader
// stays a zombie (its id, the group's, cannot be reused); once the member is gone the
// process settles at once, long before the escalation would have run, and the leader
// is reaped.
func TestLeaderPinsTheGroupUntilTheTreeIsGone(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		e := escalationScenario(t, sup, 20000)
		if !zombieChild(e.p.Pid()) || syscall.Kill(-e.p.Pid(), 0) != nil {
			t.Errorf("member running, escalation pending: leader %d zombie child %v, kill(-pgid, 0) = %v; want the zombie to hold the group id",
				e.p.Pid(), zombieChild(e.p.Pid()), syscall.Kill(-e.p.Pid(), 0))
		}
		select {
		case <-e.p.Done():
			t.Fatal("settled while a member of the tree runs")
		default:
		}
		touch(t, e.gate)
		ex := proctest.AwaitExit(t, e.p, 10*time.Second) // the escalation is 20 s away
		if ex.Signal != "SIGTERM" || ex.Reason != proc.ReasonKill {
			t.Errorf("exit %+v", ex)
		}
		if zombieChild(e.p.Pid()) {
			t.Errorf("leader %d not reaped once the killed tree settled", e.p.Pid())
		}
	})
}

// A tree left behind by a finished command keeps its leader as a zombie while a member
// runs (a sweep does not release it); once the member is gone, a sweep reaps the leader.
// In cgroup mode the leader of a command that left nothing behind is reaped at once.
func TestLingeringTreeKeepsItsLeaderUntilEmpty(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		dir := t.TempDir()
		pidFile, gate := filepath.Join(dir, "member"), filepath.Join(dir, "gate")
		p := spawn(t, sup, bashSpec(`(exec >/dev/null 2>&1 </dev/null; while [ ! -e `+gate+` ]; do sleep 0.01; done) & echo $! > `+pidFile+`; exit 0`))
		member := readPid(t, pidFile)
		t.Cleanup(func() { proctest.KillPids(member) })
		if ex := proctest.AwaitExit(t, p, 10*time.Second); proctest.Code(ex) != 0 || p.State() != proc.Completed {
			t.Fatalf("exit %+v", ex)
		}
		if proctest.Gone(member) {
			t.Fatalf("member %d gone before the gate", member)
		}
		<-p.Retired() // handed to the Supervisor's sweeps
		sup.Sweep()
		if !zombieChild(p.Pid()) {
			t.Fatalf("leader %d reaped while member %d of its group runs", p.Pid(), member)
		}
		touch(t, gate)
		proctest.WaitFor(t, 10*time.Second, "the member to exit", func() bool { return proctest.Gone(member) })
		proctest.WaitFor(t, 10*time.Second, "a sweep to reap the leader", func() bool { return !zombieChild(p.Pid()) })

		q := spawn(t, sup, bashSpec("exit 0"))
		proctest.AwaitExit(t, q, 10*time.Second)
		if sup.UsesCgroups() {
			// Right after Done, by the process itself: its tree is not remembered, so no
			// sweep would ever reap it.
			proctest.WaitFor(t, 10*time.Second, "the leader of an emptied tree to be reaped after Done", func() bool { return !zombieChild(q.Pid()) })
			return
		}
		proctest.WaitFor(t, 10*time.Second, "a sweep to reap an ordinary leader", func() bool { return !zombieChild(q.Pid()) })
	})
}

// Close ends a tree left behind and then reaps its leader.
func TestCloseReapsLingeringLeaders(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		pidFile := filepath.Join(t.TempDir(), "member")
		p := spawn(t, sup, bashSpec(`(exec >/dev/null 2>&1 </dev/null; exec sleep 300) & echo $! > `+pidFile))
		member := readPid(t, pidFile)
		t.Cleanup(func() { proctest.KillPids(member) })
		proctest.AwaitExit(t, p, 10*time.Second)
		if !zombieChild(p.Pid()) {
			t.Fatalf("leader %d reaped while its tree lives", p.Pid())
		}
		sup.Close()
		if !proctest.Gone(member) {
			t.Errorf("member %d survived Close", member)
		}
		if zombieChild(p.Pid()) {
			t.Errorf("leader %d not reaped by Close", p.Pid())
		}
	})
}

// The real hazard, end to end, in a private pid namespace where pids can be steered
// (ns_last_pid): an unrelated session leader that takes a freed group id is never
// signalled. The test binary re-runs this test inside `unshare --pid --fork
// --mount-proc` (with sh as the namespace's init, which reaps orphans); it skips where
// that is not possible.
func TestReusedGroupIdIsNeverSignalled(t *testing.T) {
	if os.Getenv("DSH_TEST_PIDNS") == "1" {
		reusedGroupIDInNamespace(t)
		return
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare(1)")
	}
	args := []string{"--pid", "--fork", "--mount-proc", "/bin/sh", "-c", `"$@"; exit $?`, "sh",
		os.Args[0], "-test.run=^TestReusedGroupIdIsNeverSignalled$", "-test.count=1", "-test.v", "-test.timeout=2m"}
	var out []byte
	for _, prefix := range [][]string{nil, {"--user", "--map-root-user"}} {
		cmd := exec.Command(unshare, append(prefix, args...)...)
		// The namespace's processes, sh included, get the inner run's own leftover marker;
		// they all die with the namespace.
		cmd.Env = append(withoutMarker(os.Environ()), "DSH_TEST_PIDNS=1")
		out, err = cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "unshare failed") {
			break
		}
	}
	text := string(out)
	switch {
	case strings.Contains(text, "unshare failed") || strings.Contains(text, "unshare:"):
		t.Skipf("cannot make a pid namespace here: %s", strings.TrimSpace(text))
	case strings.Contains(text, "--- SKIP"):
		t.Skipf("inside the pid namespace:\n%s", text)
	case err != nil || !strings.Contains(text, "--- PASS: TestReusedGroupIdIsNeverSignalled"):
		t.Fatalf("inside the pid namespace: %v\n%s", err, text)
	}
	t.Logf("inside the pid namespace:\n%s", text)
}

func withoutMarker(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, proctest.MarkerVar+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// claimer starts unrelated session leaders at chosen pids.
type claimer struct{ t *testing.T }

// claim tries to start a session leader (as an unrelated daemon would be) with pid. It
// returns the process, or nil when pid is in use by this process's zombie child (the
// pin). Runtime threads may take the pid first; it retries then.
func (c claimer) claim(pid int) *exec.Cmd {
	t := c.t
	t.Helper()
	for i := 0; i < 50; i++ {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			t.Skipf("cannot steer pids: %v", err)
		}
		cmd := exec.Command("sleep", "60")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if cmd.Process.Pid == pid {
			return cmd
		}
		cmd.Process.Kill()
		cmd.Wait()
		if zombieChild(pid) {
			return nil
		}
	}
	t.Fatalf("could not steer the next pid to %d", pid)
	return nil
}

// survives fails t unless victim is still running, then ends it.
func survives(t *testing.T, victim *exec.Cmd, what string) {
	t.Helper()
	if st := proctest.State(victim.Process.Pid); st == 0 || st == 'Z' {
		victim.Wait()
		t.Errorf("%s: the unrelated process %d that reused the group id was killed (%v)", what, victim.Process.Pid, victim.ProcessState)
		return
	}
	victim.Process.Kill()
	victim.Wait()
}

func reusedGroupIDInNamespace(t *testing.T) {
	if os.Getpid() == 1 {
		t.Skip("the test binary must not be the namespace's init")
	}
	// Process-group mode: there the group id is the only handle on the tree. (A cgroup
	// harness inside a pid namespace would take the cgroup directories of harnesses
	// outside it for stale ones.)
	t.Run("escalation", func(t *testing.T) {
		c := claimer{t}
		sup := subprocess.New(subprocess.Options{DisableCgroups: true, SpillRoot: t.TempDir()})
		defer sup.Close()
		const grace = 2 * time.Second
		e := escalationScenario(t, sup, grace.Milliseconds())
		// The member runs and the escalation is pending: the id must not be free.
		if victim := c.claim(e.p.Pid()); victim != nil {
			t.Errorf("group id %d was reused while its SIGKILL escalation was pending", e.p.Pid())
			touch(t, e.gate)
			proctest.AwaitExit(t, e.p, 20*time.Second)
			survives(t, victim, "escalation")
			return
		}
		touch(t, e.gate)
		proctest.AwaitExit(t, e.p, 20*time.Second)
		// Settled and reaped: the id is free, and nothing signals it any more, not even
		// the escalation that was pending (it was cancelled).
		victim := c.claim(e.p.Pid())
		if victim == nil {
			t.Fatalf("group id %d still held after the process settled", e.p.Pid())
		}
		for until := e.killedAt.Add(grace + 500*time.Millisecond); time.Now().Before(until); time.Sleep(20 * time.Millisecond) {
			if st := proctest.State(victim.Process.Pid); st == 0 || st == 'Z' {
				break // survives reports it
			}
		}
		proctest.AwaitExit(t, spawn(t, sup, bashSpec("exit 0")), 10*time.Second)
		sup.Close()
		survives(t, victim, "the escalation's time, then Close")
	})
	t.Run("lingering tree at Close", func(t *testing.T) {
		c := claimer{t}
		sup := subprocess.New(subprocess.Options{DisableCgroups: true, SpillRoot: t.TempDir()})
		defer sup.Close()
		dir := t.TempDir()
		pidFile, gate := filepath.Join(dir, "member"), filepath.Join(dir, "gate")
		p := spawn(t, sup, bashSpec(`(exec >/dev/null 2>&1 </dev/null; while [ ! -e `+gate+` ]; do sleep 0.01; done) & echo $! > `+pidFile+`; exit 0`))
		member := readPid(t, pidFile)
		proctest.AwaitExit(t, p, 10*time.Second)
		touch(t, gate)
		proctest.WaitFor(t, 10*time.Second, "the member to exit", func() bool { return proctest.Gone(member) })
		// Until a sweep finds the group empty and reaps the leader, the id stays taken.
		var victim *exec.Cmd
		proctest.WaitFor(t, 10*time.Second, "the group id to be freed", func() bool {
			victim = c.claim(p.Pid())
			return victim != nil
		})
		sup.Close()
		survives(t, victim, "Close")
	})
}
