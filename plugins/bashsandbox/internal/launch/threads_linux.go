package launch

// Spare threads: goroutines locked to threads already prepared for a command
// (prepareThread), waiting for one. Each start takes one and has another made, so the
// thread's creation and the costly part of its confinement are off the command's path.
const spareThreads = 2

// spare is a prepared thread waiting for its one job; err says why it could not be
// prepared (the job then starts the launcher's failure mode).
type spare struct {
	job chan func(prepared error)
}

// makeSpare starts a spare thread.
func (s *box) makeSpare() {
	go func() {
		err := prepareThread(s.dropCaps, s.lastCap) // locks the goroutine to its thread
		sp := spare{job: make(chan func(error), 1)}
		s.spares <- sp
		(<-sp.job)(err)
	}()
}

// onSpare runs job on a prepared thread (a spare, or a new one when none is ready),
// which dies when job returns.
func (s *box) onSpare(job func(prepared error)) {
	select {
	case sp := <-s.spares:
		s.makeSpare()
		sp.job <- job
	default:
		go func() { job(prepareThread(s.dropCaps, s.lastCap)) }()
	}
}

// ruleset returns the Landlock ruleset of p, made once per distinct policy and kept
// (a ruleset may restrict any number of threads; each restriction is a domain of its
// own, so commands still cannot signal or trace each other).
func (s *box) ruleset(p Policy) (int, uint32, error) {
	key := p.Mode + "\x00" + p.WorkspaceRoot + "\x00" + p.Network
	for _, r := range p.WritableRoots {
		key += "\x00" + r
	}
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if r, ok := s.rulesets[key]; ok {
		return r.fd, r.flags, nil
	}
	fd, flags, err := newRuleset(p, s.pinned)
	if err != nil {
		return -1, 0, err
	}
	if s.rulesets == nil {
		s.rulesets = map[string]cachedRuleset{}
	}
	s.rulesets[key] = cachedRuleset{fd, flags}
	return fd, flags, nil
}

type cachedRuleset struct {
	fd    int
	flags uint32
}
