package subprocess

import "slices"

// EndTree waits until the process has settled, then ends what is left of its tree —
// what the leader left running (`cmd &`, a daemon that kept the cgroup) — SIGTERM, then
// SIGKILL after graceMs, and returns once nothing of it is left: for a process whose
// tree must not outlive it (a hook). Its exit stays the leader's own.
func (p *Process) EndTree() {
	<-p.Done()
	<-p.retired
	s := p.sup
	s.sweeping.Lock()
	defer s.sweeping.Unlock()
	s.mu.Lock()
	i := slices.IndexFunc(s.lingering, func(t lingerTree) bool { return t.p == p })
	if i < 0 {
		s.mu.Unlock()
		return // nothing lingers: the tree is gone (or Close ended it)
	}
	t := s.lingering[i]
	s.lingering = slices.Delete(slices.Clone(s.lingering), i, i+1)
	s.mu.Unlock()
	s.endReleased([]lingerTree{t}, maxGrace)
}
