package subprocess_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
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

// The v1 path end to end, on hosts with cgroup v1 hierarchies (skipped elsewhere):
// the limits hold, the usage is accounted, every directory goes with its command,
// session and Supervisor, and crash cleanup and the start-up sweep reach them.

// needV1 skips the test unless this host enforces r through cgroup v1.
func needV1(t *testing.T, sup *subprocess.Supervisor, r proc.ResourceLimits) {
	t.Helper()
	if err := sup.CheckLimits(r); err != nil {
		t.Skipf("no cgroup v1 here: %v", err)
	}
	if m := sup.LimitsMechanism(r); !strings.HasPrefix(m, "cgroup v1") {
		t.Skipf("the limits are enforced by %s here, not cgroup v1", m)
	}
}

func TestLimitsV1(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		r := proc.ResourceLimits{Memory: 64 << 20, Processes: 20, SessionProcesses: 100}
		needV1(t, sup, r)
		spec := bashSpec(`perl -e '$x = "a"; $x x= (100 << 20)'; for i in $(seq 30); do sleep 0.2 & done; wait`)
		spec.Owner, spec.Resources = "v1", r
		p := spawn(t, sup, spec)
		dirs := p.LimitCgroups()
		if len(dirs) < 2 || !strings.HasSuffix(dirs["memory"], "/s-v1/c"+strconv.Itoa(idOf(dirs["memory"]))) {
			t.Fatalf("the command's cgroups %v", dirs)
		}
		ex := proctest.AwaitExit(t, p, 30*time.Second)
		b := ex.Budget
		if b == nil || len(b.Hits) != 2 || b.Hits[0] != (proc.LimitHit{Limit: proc.LimitMemory, Size: 64 << 20}) ||
			b.Hits[1] != (proc.LimitHit{Limit: proc.LimitProcesses, Size: 20}) || b.CPUMs < 0 || b.PeakMemoryBytes < 60<<20 {
			t.Fatalf("budget %+v", b)
		}
		// The command's directories go once its tree is known to be gone (in
		// process-group mode, at the sweep after it settled).
		gone := func(d string) bool { _, err := os.Stat(d); return os.IsNotExist(err) }
		for c, d := range dirs {
			proctest.WaitFor(t, 5*time.Second, "the command's "+c+" cgroup removed", func() bool { return gone(d) })
		}
		// The session's directories go with the session; the instance's with the
		// Supervisor.
		session := filepath.Dir(dirs["pids"])
		if gone(session) {
			t.Fatal("the session's cgroup is gone before the session")
		}
		sup.EndOwner("v1")
		if !gone(session) {
			t.Errorf("the session's cgroup %s is left after its end", session)
		}
		instance := filepath.Dir(session)
		sup.Close()
		if _, err := os.Stat(instance); !os.IsNotExist(err) {
			t.Errorf("the instance's cgroup %s is left after Close: %v", instance, err)
		}
	})
}

func idOf(dir string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(dir), "c"))
	return n
}

// Every command is the OOM killer's first choice: its leader's oom_score_adj is 1000
// once Spawn returns (what it forks from then on inherits it); the harness's own is
// untouched.
func TestCommandsAreTheOOMKillersFirstChoice(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		own, _ := os.ReadFile("/proc/self/oom_score_adj")
		p := spawn(t, sup, bashSpec(`exec sleep 30`))
		got, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", p.Pid()))
		if err != nil || strings.TrimSpace(string(got)) != "1000" {
			t.Errorf("the command's oom_score_adj %q (%v), want 1000", got, err)
		}
		if now, _ := os.ReadFile("/proc/self/oom_score_adj"); string(now) != string(own) {
			t.Errorf("the harness's own oom_score_adj changed: %q → %q", own, now)
		}
		p.Kill()
		proctest.AwaitExit(t, p, 10*time.Second)
	})
}

// A tree left running when its session ends is ended with it (the lifetime rule) and
// its cgroups go with it; Close removes the instance's.
func TestLimitsV1Lingering(t *testing.T) {
	sup := newSup(t, false)
	r := proc.ResourceLimits{Processes: 20}
	needV1(t, sup, r)
	spec := bashSpec(`sleep 300 </dev/null >/dev/null 2>&1 & echo $!`)
	spec.Owner, spec.Resources = "linger", r
	p := spawn(t, sup, spec)
	proctest.AwaitExit(t, p, 10*time.Second)
	left, _ := strconv.Atoi(strings.TrimSpace(p.Stdout().Output().Text))
	dir := p.LimitCgroups()["pids"]
	if proctest.Gone(left) {
		t.Fatal("the background sleep is gone before its session ended")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the cgroup of a tree still running: %v", err)
	}
	sup.EndOwner("linger")
	<-p.Retired()
	if !proctest.Gone(left) {
		t.Fatal("the session's end left the background sleep running")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the cgroup of the ended session's tree: %v", err)
	}
	sup.Close()
	if _, err := os.Stat(filepath.Dir(filepath.Dir(dir))); !os.IsNotExist(err) {
		t.Errorf("the instance's cgroup is left after Close: %v", err)
	}
}

// If the harness dies by SIGKILL, its watchdog ends the commands of its cgroup v1
// directories (a setsid escapee too, with or without cgroup v2) and removes them.
func TestLimitsCrashCleanup(t *testing.T) {
	if err := newSup(t, false).CheckLimits(proc.ResourceLimits{Processes: 1}); err != nil {
		t.Skip(err)
	}
	for _, mode := range []string{"crash-limits", "crash-limits-process-group"} {
		t.Run(mode, func(t *testing.T) {
			proctest.NoLeftovers(t)
			helper, report := startHelper(t, mode)
			pids := pidsOf(t, field(t, report, "pids"))
			dirs := strings.Fields(field(t, report, "dirs"))
			if len(pids) != 2 || len(dirs) == 0 {
				t.Fatalf("report %q", report)
			}
			if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			proctest.WaitFor(t, 5*time.Second, fmt.Sprintf("the processes %v to be gone", pids), func() bool { return proctest.AllGone(pids...) })
			if !proctest.Until(10*time.Second, func() bool {
				for _, d := range dirs {
					if _, err := os.Stat(d); !os.IsNotExist(err) {
						return false
					}
				}
				return true
			}) {
				for _, d := range dirs {
					out, _ := exec.Command("sh", "-c", "find "+d+" -name cgroup.procs | xargs -r -n1 sh -c 'echo $0: $(cat $0)'").CombinedOutput()
					t.Logf("%s:\n%s", d, out)
				}
				t.Fatal("the cgroup v1 directories are left")
			}
		})
	}
}

// A Supervisor that starts where a dead harness left a command running in its cgroup
// v1 directories kills it and removes them. The harness is a helper moved into a pids
// cgroup of the test's own first, so that no other dsh starting meanwhile (another
// package's tests, in this process's cgroups) sweeps the planted directory before it.
func TestLimitsStartKillsWhatDeadInstancesLeft(t *testing.T) {
	proctest.NoLeftovers(t)
	own := proctest.OwnCgroupV1(t, "pids")
	suffix := make([]byte, 4)
	rand.Read(suffix)
	base := filepath.Join(own, "dshtest-"+hex.EncodeToString(suffix)) // no dsh's "dsh-" prefix
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Skipf("the pids hierarchy is not writable: %v", err)
	}
	t.Cleanup(func() {
		// After every process in it is gone (the cleanups below run first).
		proctest.WaitFor(t, 10*time.Second, "the test's parent cgroup to be removable", func() bool {
			return os.Remove(base) == nil || os.IsNotExist(os.Remove(base))
		})
	})
	dead := filepath.Join(base, fmt.Sprintf("dsh-%d-cafe", deadPid(t)), "s-x", "c1")
	if err := os.MkdirAll(dead, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dead); os.Remove(filepath.Dir(dead)); os.Remove(filepath.Dir(filepath.Dir(dead))) })
	cmd := exec.Command("sh", "-c", `echo $$ > "$1/cgroup.procs" && exec sleep 300`, "sh", dead)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	proctest.WaitFor(t, 10*time.Second, "the dead harness's command in its cgroup", func() bool {
		b, _ := os.ReadFile(filepath.Join(dead, "cgroup.procs"))
		return strings.TrimSpace(string(b)) == strconv.Itoa(cmd.Process.Pid)
	})
	// The helper moves itself into base, then execs the test binary as the harness.
	_, report := startHelper(t, "start", "sh", "-c", `echo $$ > "$1/cgroup.procs" && shift && exec "$@"`, "sh", base)
	proctest.WaitFor(t, 5*time.Second, "the command killed", func() bool { return proctest.State(cmd.Process.Pid) == 'Z' || proctest.Gone(cmd.Process.Pid) })
	if _, err := os.Stat(filepath.Dir(filepath.Dir(dead))); !os.IsNotExist(err) {
		t.Errorf("the dead harness's cgroup is still there: %v", err)
	}
	want := `msg="subprocess: killed the commands that dead dsh instances left running" cgroups=1 hierarchy=` + base
	if logs := field(t, report, "logs"); !strings.Contains(logs, want) {
		t.Errorf("logs:\n%s\nwant %s", logs, want)
	}
}

// The v2 path end to end, where the harness's cgroup delegates memory and pids to
// cgroup v2 (skipped elsewhere: TestLimitsV2Files checks its files on a fake tree).
func TestLimitsV2EndToEnd(t *testing.T) {
	sup := newSup(t, false)
	r := proc.ResourceLimits{Memory: 64 << 20, Processes: 20}
	if m := sup.LimitsMechanism(r); m != "cgroup v2 (memory, pids)" {
		t.Skipf("cgroup v2 does not delegate memory and pids here (the limits are enforced by %q); TestLimitsV2Files checks the v2 files", m)
	}
	spec := bashSpec(`perl -e '$x = "a"; $x x= (100 << 20)'; for i in $(seq 30); do sleep 0.2 & done; wait`)
	spec.Owner, spec.Resources = "v2", r
	p := spawn(t, sup, spec)
	ex := proctest.AwaitExit(t, p, 30*time.Second)
	if b := ex.Budget; b == nil || len(b.Hits) != 2 || b.Hits[0].Limit != proc.LimitMemory || b.Hits[1].Limit != proc.LimitProcesses {
		t.Fatalf("budget %+v", b)
	}
}

// A command started through the limits path keeps its context's abort: a limit is no
// reason to outlive the call.
func TestLimitsAbort(t *testing.T) {
	sup := newSup(t, false)
	r := proc.ResourceLimits{Processes: 20}
	needV1(t, sup, r)
	ctx, cancel := context.WithCancel(context.Background())
	spec := bashSpec(`echo up; exec sleep 300`)
	spec.Resources = r
	p, err := sup.Spawn(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	waitOutput(t, p, "up")
	cancel()
	if ex := proctest.AwaitExit(t, p, 10*time.Second); ex.Reason != proc.ReasonAbort || ex.Budget == nil {
		t.Fatalf("exit %+v", ex)
	}
}

// The cgroups of a command that reached no limit serve the next command of its kind,
// their counters starting afresh for it; those of one that reached a limit are not
// reused.
func TestLimitsV1Reuse(t *testing.T) {
	sup := newSup(t, false)
	r := proc.ResourceLimits{Memory: 64 << 20, Processes: 20}
	needV1(t, sup, r)
	run := func(script string) (*subprocess.Process, proc.Exit) {
		t.Helper()
		spec := bashSpec(script)
		spec.Owner, spec.Resources = "reuse", r
		p := spawn(t, sup, spec)
		ex := proctest.AwaitExit(t, p, 30*time.Second)
		<-p.Retired()
		return p, ex
	}
	first, _ := run("true")
	second, ex := run(`perl -e '$x = "a"; $x x= (100 << 20)'`)
	if first.LimitCgroups()["memory"] != second.LimitCgroups()["memory"] {
		t.Errorf("a command's cgroups were not reused: %s, then %s", first.LimitCgroups()["memory"], second.LimitCgroups()["memory"])
	}
	if ex.Budget == nil || len(ex.Budget.Hits) != 1 || ex.Budget.Hits[0].Limit != proc.LimitMemory {
		t.Fatalf("the killed command's budget %+v", ex.Budget)
	}
	third, ex := run(`for i in $(seq 30); do sleep 0.2 & done; wait`)
	if third.LimitCgroups()["memory"] == second.LimitCgroups()["memory"] {
		t.Error("the cgroups of a command that reached a limit were reused")
	}
	if ex.Budget == nil || len(ex.Budget.Hits) != 1 || ex.Budget.Hits[0].Limit != proc.LimitProcesses {
		t.Fatalf("budget %+v: want the process limit alone (no memory kill of before)", ex.Budget)
	}
	fourth, ex := run("true")
	if ex.Budget == nil || len(ex.Budget.Hits) != 0 || fourth.LimitCgroups()["pids"] == third.LimitCgroups()["pids"] {
		t.Fatalf("after a refusal: %+v in %v (then %v)", ex.Budget, fourth.LimitCgroups(), third.LimitCgroups())
	}
	// Memory still charged to them (the page cache of a file the command wrote)
	// would count against the next command: not reused.
	fifth, _ := run("head -c 8000000 /dev/zero > " + filepath.Join(t.TempDir(), "cached"))
	if sixth, _ := run("true"); sixth.LimitCgroups()["memory"] == fifth.LimitCgroups()["memory"] {
		t.Error("the cgroups of a command that left 8 MB of page cache were reused")
	}
}

// TestLimitsCPUTimeIsEachCommandsOwn: commands reuse cgroups (cgroup v2 directories
// from the pool, v1 ones kept as spares), whose CPU counters keep counting; a
// command's usage is still its own — after a limited busy command (whose settle read
// the counters with nothing left: the next command starts from them without a read)
// and after a busy command without limits (whose directory's counters nobody read).
func TestLimitsCPUTimeIsEachCommandsOwn(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		r := proc.ResourceLimits{Processes: 50}
		needV1(t, sup, r)
		run := func(script string, r proc.ResourceLimits) *proc.Budget {
			spec := bashSpec(script)
			spec.Owner, spec.Resources = "cpu", r
			p := spawn(t, sup, spec)
			ex := proctest.AwaitExit(t, p, 30*time.Second)
			<-p.Retired()
			return ex.Budget
		}
		// 300 ms of CPU time, however busy the host is (the timeout is a safety net).
		const busy = `timeout 60 perl -e '1 while (@t = times) && $t[0] + $t[1] < 0.3'`
		if b := run(busy, r); b == nil || b.CPUMs < 250 {
			t.Fatalf("a busy command's budget %+v, want at least 250 ms of CPU", b)
		}
		run(busy, proc.ResourceLimits{})
		for i := range 4 {
			if b := run("true", r); b == nil || b.CPUMs < 0 || b.CPUMs > 100 {
				t.Fatalf("`true` #%d after busy commands: budget %+v, want its own CPU time (a few ms)", i, b)
			}
		}
	})
}
