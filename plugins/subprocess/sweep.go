package subprocess

import (
	"slices"
	"syscall"
	"time"

	"github.com/dsh-dev/dsh/proc"
)

// lingerTree is a settled process whose tree may live on: its leader exited by itself
// while other members kept running (a `cmd &` left behind), or, in process-group mode,
// nobody has looked yet. Its leader stays an unreaped zombie, which keeps the group id
// from being reused, until a sweep finds the tree empty; what is left of it is ended
// when the Supervisor closes.
type lingerTree struct {
	p      *Process
	checks int // sweeps that found it still alive
}

// Sweep cadence: a new lingering tree is looked at after sweepMin (in process-group mode
// that is when the leader of an ordinary command is reaped); a tree found alive is looked
// at again after twice the previous delay, up to sweepMax.
const (
	sweepMin = 200 * time.Millisecond
	sweepMax = 5 * time.Second
)

// forget drops a settled process; a tree that may live on is remembered (with its
// leader unreaped) until a sweep finds it empty, or Close ends it.
func (s *Supervisor) forget(p *Process, lingering bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, p)
	if lingering {
		s.lingering = append(s.lingering, lingerTree{p: p})
		s.scheduleSweepLocked(sweepMin)
	}
}

// scheduleSweepLocked makes sure a sweep runs within d.
func (s *Supervisor) scheduleSweepLocked(d time.Duration) {
	if s.closing {
		return
	}
	at := time.Now().Add(d)
	if s.sweepTimer != nil {
		if !at.Before(s.sweepAt) || !s.sweepTimer.Stop() {
			return // an earlier sweep is due (or running, and reschedules for what is left)
		}
		s.sweepers.Done()
	}
	s.sweepAt = at
	s.sweepers.Add(1)
	s.sweepTimer = time.AfterFunc(d, func() {
		defer s.sweepers.Done()
		s.mu.Lock()
		s.sweepTimer = nil
		s.mu.Unlock()
		s.sweep()
	})
}

// sweep releases the lingering trees that have ended (reaps their leaders, removes their
// cgroups) and schedules itself again while some are left. One scan of /proc serves every
// process-group tree.
func (s *Supervisor) sweep() {
	s.sweeping.Lock()
	defer s.sweeping.Unlock()
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	trees := s.lingering
	s.lingering = nil
	s.mu.Unlock()
	alive := treesAlive(trees)
	keep := make([]lingerTree, 0, len(trees))
	for i, t := range trees {
		if t.p.cg != nil && !alive[i] && t.p.cg.remove() != nil {
			alive[i] = true // not removable yet: look again later
		}
		if !alive[i] {
			t.p.release()
			t.p.bud.remove()
			continue
		}
		t.checks++
		keep = append(keep, t)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lingering = append(s.lingering, keep...)
	if len(s.lingering) == 0 {
		return
	}
	d := sweepMax
	for _, t := range s.lingering {
		d = min(d, sweepMin<<min(t.checks, 8))
	}
	s.scheduleSweepLocked(d)
}

// treesAlive reports, for each tree, whether any of its processes (other than zombies)
// is left: its cgroup is populated, or, without one, its process group has a live member.
func treesAlive(trees []lingerTree) []bool {
	alive := make([]bool, len(trees))
	var groups map[int]bool
	for i, t := range trees {
		if t.p.cg != nil {
			alive[i] = t.p.cg.populated()
			continue
		}
		if groups == nil {
			groups = liveGroups()
		}
		alive[i] = groups[t.p.pid]
	}
	return alive
}

// maxGrace is endTrees' bound that bounds nothing.
const maxGrace = time.Duration(proc.MaxGraceMs) * time.Millisecond

// endTrees ends lingering trees: SIGTERM to each tree (its cgroup, or its group), then,
// once the longest grace period (at most limit) has passed, SIGKILL to whatever is
// left. A group is signalled only while its leader is unreaped (see Process.signal), so
// no group id can have been reused.
func endTrees(trees []lingerTree, limit time.Duration) {
	if len(trees) == 0 {
		return
	}
	alive := treesAlive(trees)
	var grace time.Duration
	for i, t := range trees {
		if !alive[i] {
			continue
		}
		grace = max(grace, t.p.grace)
		t.p.signal(syscall.SIGTERM)
	}
	grace = min(grace, limit)
	waitUntil := func(d time.Duration) bool {
		deadline := time.Now().Add(d)
		for {
			if !slices.Contains(alive, true) {
				return true
			}
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(10 * time.Millisecond)
			alive = treesAlive(trees)
		}
	}
	if waitUntil(grace) {
		return
	}
	for i, t := range trees {
		if alive[i] {
			t.p.signal(syscall.SIGKILL)
		}
	}
	waitUntil(2 * time.Second)
}
