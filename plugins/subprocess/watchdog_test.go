package subprocess_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
)

// restartHelper is the helper harness of TestWatchdogRestartStillCleansUp: it starts
// commands, kills its own watchdog, waits for the new one to take over, and reports the
// commands' pids, both watchdogs and what it logged.
func restartHelper(t *testing.T, noCgroups bool, spillRoot string, report io.Writer) {
	logs := &proctest.Buffer{}
	sup := subprocess.New(subprocess.Options{DisableCgroups: noCgroups, SpillRoot: spillRoot, Logger: logs.Logger()})
	var pids, dirs []string
	for _, script := range []string{"echo $$; exec sleep 300", "nohup sleep 300 </dev/null >/dev/null 2>&1 & echo $!"} {
		p := spawn(t, sup, bashSpec(script))
		waitOutput(t, p, "\n")
		pids = append(pids, strings.TrimSpace(p.Stdout().Output().Text))
	}
	limits := proc.ResourceLimits{Memory: 256 << 20, Processes: 50}
	if sup.CheckLimits(limits) == nil {
		// A setsid escapee under limits: without cgroup v2 only its v1 directory finds it.
		spec := bashSpec("setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!")
		spec.Owner, spec.Resources = "restart", limits
		p := spawn(t, sup, spec)
		waitOutput(t, p, "\n")
		pids = append(pids, strings.TrimSpace(p.Stdout().Output().Text))
		for _, d := range p.LimitCgroups() {
			dirs = append(dirs, filepath.Dir(filepath.Dir(d))) // the instance directory
		}
	}
	old := sup.WatchdogPid()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	proctest.WaitFor(t, 10*time.Second, "a new watchdog", func() bool { return sup.WatchdogPid() != old })
	// A command started after the restart is covered too.
	p := spawn(t, sup, bashSpec("echo $$; exec sleep 300"))
	waitOutput(t, p, "\n")
	pids = append(pids, strings.TrimSpace(p.Stdout().Output().Text))
	fmt.Fprintf(report, "pids %s\ndirs %s\nold %d\nnew %d\n", strings.Join(pids, " "), strings.Join(dirs, " "), old, sup.WatchdogPid())
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		fmt.Fprintf(report, "log %s\n", line)
	}
}

// The watchdog is supervised: killed, its death is logged and a new one takes over,
// told every command and cgroup v1 directory the old one knew — so that a SIGKILL of
// the harness after the restart still ends every command (checked by pid; a setsid
// escapee under resource limits too), and the new watchdog then exits, having removed
// the cgroup v1 directories of those limits.
func TestWatchdogRestartStillCleansUp(t *testing.T) {
	for _, mode := range []string{"restart-cgroup", "restart-process-group"} {
		t.Run(strings.TrimPrefix(mode, "restart-"), func(t *testing.T) {
			proctest.NoLeftovers(t)
			if mode == "restart-cgroup" {
				probe := subprocess.New(subprocess.Options{SpillRoot: t.TempDir(), NoCrashCleanup: true})
				cgroups, why := probe.UsesCgroups(), probe.Isolation()
				probe.Close()
				if !cgroups {
					t.Skipf("cgroup isolation unavailable: %s", why)
				}
			}
			helper, report := startHelper(t, mode)
			pids := pidsOf(t, field(t, report, "pids"))
			old, now := pidsOf(t, field(t, report, "old"))[0], pidsOf(t, field(t, report, "new"))[0]
			logged := strings.Join(report, "\n")
			for _, want := range []string{
				fmt.Sprintf(`level=WARN msg="subprocess: the crash-cleanup watchdog died; starting a new one" pid=%d`, old),
				fmt.Sprintf(`level=INFO msg="subprocess: a new crash-cleanup watchdog took over" pid=%d`, now),
			} {
				if !strings.Contains(logged, want) {
					t.Errorf("the helper's log lacks %s:\n%s", want, logged)
				}
			}
			// The killed one's pipe closes as it exits, a moment before it is gone.
			proctest.Until(5*time.Second, func() bool { return proctest.Gone(old) })
			if !proctest.Gone(old) || proctest.Gone(now) || len(pids) < 3 {
				t.Fatalf("watchdogs %d (gone %v) → %d (gone %v); commands %v", old, proctest.Gone(old), now, proctest.Gone(now), pids)
			}
			for _, pid := range pids {
				if proctest.Gone(pid) {
					t.Fatalf("command %d not running before the SIGKILL", pid)
				}
			}
			if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			proctest.WaitFor(t, 2*time.Second, fmt.Sprintf("the commands %v to be gone within 2s of the SIGKILL", pids), func() bool {
				return proctest.AllGone(pids...)
			})
			proctest.WaitFor(t, 10*time.Second, "the new watchdog to exit", func() bool { return proctest.Gone(now) })
			for _, d := range strings.Fields(field(t, report, "dirs")) {
				if _, err := os.Stat(d); !os.IsNotExist(err) {
					t.Errorf("the cgroup v1 directory %s the dead watchdog knew is left: %v", d, err)
				}
			}
		})
	}
}

// Killed again and again, the watchdog is replaced each time; the harness keeps no
// descriptor of the dead ones, and Close ends the last one.
func TestWatchdogRestartsKeepNoDescriptor(t *testing.T) {
	proctest.NoLeftovers(t)
	sup := subprocess.New(subprocess.Options{DisableCgroups: true, SpillRoot: t.TempDir(), Logger: (&proctest.Buffer{}).Logger()})
	defer sup.Close()
	sup.WatchdogPid() // its start, in the background, is over: its descriptors are closed
	before := proctest.FDs(t)
	seen := map[int]bool{}
	for range 3 {
		wd := sup.WatchdogPid()
		seen[wd] = true
		if err := syscall.Kill(wd, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		proctest.WaitFor(t, 10*time.Second, "a new watchdog", func() bool { return !seen[sup.WatchdogPid()] })
		proctest.WaitFor(t, 10*time.Second, fmt.Sprintf("watchdog %d to be gone", wd), func() bool { return proctest.Gone(wd) })
	}
	// A restart's own descriptors (the pipe its first stage reports on) close just after
	// the new pid is known: poll for the count to come back.
	if !proctest.Until(10*time.Second, func() bool { return len(proctest.FDs(t)) == len(before) }) {
		t.Errorf("descriptors %v → %v after three restarts", before, proctest.FDs(t))
	}
	last := sup.WatchdogPid()
	sup.Close()
	proctest.WaitFor(t, 10*time.Second, "the last watchdog to exit after Close", func() bool { return proctest.Gone(last) })
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", last)); err == nil && !proctest.Gone(last) {
		t.Errorf("watchdog %d still runs", last)
	}
}
