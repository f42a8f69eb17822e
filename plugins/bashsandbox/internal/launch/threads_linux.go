package launch

// Spare threads: goroutines locked to threads already prepared for a command
// (prepareThread), waiting for one. Each start takes one and has another made, so the
// thread's creation and the costly part of its confinement are off the command's path.
const spareThreads = 2

// threads hands out prepared threads, one per command.
type threads struct {
	spares   chan spare
	dropCaps bool // empty the bounding set (see prepareThread)
	lastCap  int
}

// spare is a prepared thread waiting for its one job; err says why it could not be
// prepared (the job then starts the launcher's failure mode).
type spare struct {
	job chan func(prepared error)
}

// newThreads starts the spare threads.
func newThreads(dropCaps bool, lastCap int) *threads {
	t := &threads{spares: make(chan spare, spareThreads), dropCaps: dropCaps, lastCap: lastCap}
	for range spareThreads {
		t.makeSpare()
	}
	return t
}

// makeSpare starts a spare thread.
func (t *threads) makeSpare() {
	go func() {
		err := prepareThread(t.dropCaps, t.lastCap) // locks the goroutine to its thread
		sp := spare{job: make(chan func(error), 1)}
		t.spares <- sp
		(<-sp.job)(err)
	}()
}

// run runs job on a prepared thread (a spare, or a new one when none is ready), which
// dies when job returns.
func (t *threads) run(job func(prepared error)) {
	select {
	case sp := <-t.spares:
		t.makeSpare()
		sp.job <- job
	default:
		go func() { job(prepareThread(t.dropCaps, t.lastCap)) }()
	}
}
