package jobs

// PromptText exposes the tool:jobs section text to the black-box tests.
const PromptText = promptText

// StatusLine exposes the "[status: …]" rendering to the black-box tests.
func (s Snapshot) StatusLine() string { return s.statusLine() }

// ReadersOf reports how many reads are waiting on job id (test hook).
func ReadersOf(r *Runtime, id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if j, ok := r.jobs[id]; ok {
		return j.readers
	}
	return -1
}
