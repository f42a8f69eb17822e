package subprocess

import "testing"

// Introspection for the black-box tests.

// UsesCgroups reports whether new trees get a cgroup of their own.
func (s *Supervisor) UsesCgroups() bool { return s.usesCgroups() }

// SpillBytes is the total size of the Supervisor's spill files: bytes are counted
// before they are written and uncounted once their file is deleted, so the files on
// disk never hold more, and SpillBytes never exceeds SpillBudget.
func (s *Supervisor) SpillBytes() int64 { return s.spool.Used() }

// SpillBudget is the limit on SpillBytes (Options.SpillBudgetBytes, defaulted).
func (s *Supervisor) SpillBudget() int64 { return s.spool.Budget() }

// Cgroup is the directory of the tree's cgroup, or "" when the tree runs under its
// process group only.
func (p *Process) Cgroup() string {
	if p.cg == nil {
		return ""
	}
	return p.cg.path
}

// Sweep runs a sweep of the lingering trees now (it normally runs on a timer).
func (s *Supervisor) Sweep() { s.sweep() }

// WatchdogPid is the crash-cleanup watchdog's pid (0 if it did not start).
func (s *Supervisor) WatchdogPid() int {
	s.awaitWatchdog()
	if s.watchdog == nil {
		return 0
	}
	return s.watchdog.currentPid()
}

// Retired is closed once a settled process has released what it held (right after Done).
func (p *Process) Retired() <-chan struct{} { return p.retired }

// LimitCgroups are the tree's cgroup v1 directories of resource limits, by controller.
func (p *Process) LimitCgroups() map[string]string {
	out := map[string]string{}
	if p.bud == nil {
		return out
	}
	for _, d := range p.bud.dirs {
		for _, c := range d.h.ctls {
			out[c] = d.dir.path
		}
	}
	return out
}

// HoldExitReports holds every waiter's report of its leader's exit until release is
// closed (until the test ends at the latest).
func HoldExitReports(t testing.TB, release <-chan struct{}) {
	hook := func() { <-release }
	beforeExitReport.Store(&hook)
	t.Cleanup(func() { beforeExitReport.Store(nil) })
}
