package jobs

// ReadersOf reports how many reads are waiting on job id (test hook).
func ReadersOf(r *Runtime, id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if j, ok := r.jobs[id]; ok {
		return j.readers
	}
	return -1
}
