package subprocess

import (
	"slices"
	"time"

	"github.com/dsh-dev/dsh/proc"
)

// What a tree's own end does not end, something else does: the exit of its leader, for
// a tree spawned with Spec.EndWithLeader (a call an escalation allowed once), and the end
// of the harness session it runs for (EndOwner).

// The bounds of a session's end: the SIGKILL comes at most endOwnerGrace after the
// SIGTERM, whatever a tree's graceMs, and the end waits at most endOwnerWait for the
// killed trees to settle — so that nothing of the session is left within 2 s.
const (
	endOwnerGrace = 500 * time.Millisecond
	endOwnerWait  = time.Second
)

// endLeftovers kills what the tree still holds now that its leader exited
// (Spec.EndWithLeader): the process then settles once that is gone, or once the SIGKILL
// escalation ran, and its exit stays the leader's own. An emptied cgroup needs no kill.
func (p *Process) endLeftovers() {
	if p.cg != nil && !p.cg.populated() {
		return
	}
	p.tear.Kill(proc.ReasonKill, ErrKilled, true)
}

// KillNow is Kill without the grace period: SIGTERM, then at once SIGKILL to whatever is
// left, for a tree that must not be given time (a box that stopped answering: a stopped
// process acts on no signal but SIGKILL). It returns false once the process has settled.
func (p *Process) KillNow() bool {
	if !p.tear.Kill(proc.ReasonKill, ErrKilled, true) {
		return false
	}
	(*tree)(p).Escalate()
	return true
}

// killWithin kills the tree like Kill, with the SIGKILL escalation no later than d from
// now.
func (p *Process) killWithin(d time.Duration) {
	if !p.tear.Kill(proc.ReasonKill, ErrKilled, true) || d >= p.grace {
		return
	}
	time.AfterFunc(d, func() {
		select {
		case <-p.tear.Done():
		default:
			(*tree)(p).Escalate()
		}
	})
}

// EndOwner ends what the Supervisor keeps for owner, a harness session that ended. Every
// tree that runs for it (but those that host others: Spec.Hosts) is killed — live commands (foreground calls, background jobs)
// and what finished ones left running (`cmd &`, setsid and nohup children: as far as
// their cgroup, or else their process group, reaches) — with SIGTERM, then SIGKILL
// after at most half a second, and waited for; then the OnEndOwner hooks run; then its
// spill files are deleted, and its cgroups of resource limits go once its last
// process's do. An empty owner (no session) has no trees of its own. The
// plugin runs it when a harness session ends; it returns when all of that is done.
func (s *Supervisor) EndOwner(owner string) {
	s.life.RLock() // Close waits for the kill to finish
	if !s.closed && owner != "" {
		s.killOwner(owner)
	}
	s.life.RUnlock()
	s.mu.Lock()
	hooks := slices.Clone(s.ownerEnds)
	s.mu.Unlock()
	for _, fn := range hooks {
		fn(owner)
	}
	s.spool.EndOwner(owner)
	s.budgets.endSession(owner)
}

// OnEndOwner registers fn to run at every EndOwner, once the owner's trees are gone and
// before its spill files are deleted: for state another package keeps per session on
// this Supervisor (a sandbox's boxes and temp dirs), whichever executor is active when
// the session ends.
func (s *Supervisor) OnEndOwner(fn func(owner string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ownerEnds = append(s.ownerEnds, fn)
}

// killOwner kills every tree of owner but its hosts and waits (bounded) until they are gone: the live
// ones settle, the lingering ones are ended and released. A live tree that settled by
// itself meanwhile and left something behind is found lingering afterwards.
func (s *Supervisor) killOwner(owner string) {
	s.mu.Lock()
	var live []*Process
	for p := range s.live {
		if p.owner == owner && !p.hosts {
			live = append(live, p)
		}
	}
	s.mu.Unlock()
	for _, p := range live {
		p.killWithin(endOwnerGrace)
	}
	s.endReleased(s.takeLingering(owner), endOwnerGrace)
	deadline := time.NewTimer(endOwnerWait)
	defer deadline.Stop()
	for _, p := range live {
		select {
		case <-p.retired:
		case <-deadline.C:
			s.log.Warn("subprocess: a process of an ended session has not settled yet", "pid", p.pid)
			return
		}
	}
	s.endReleased(s.takeLingering(owner), endOwnerGrace)
}

// takeLingering removes owner's trees from the lingering ones and returns them. It waits
// for a sweep in progress, which holds the trees it looks at.
func (s *Supervisor) takeLingering(owner string) []lingerTree {
	s.sweeping.Lock()
	defer s.sweeping.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	var mine, rest []lingerTree
	for _, t := range s.lingering {
		if t.p.owner == owner {
			mine = append(mine, t)
		} else {
			rest = append(rest, t)
		}
	}
	s.lingering = rest
	return mine
}
