package main_test

import (
	"slices"
	"sync"

	"github.com/dsh-dev/dsh/internal/proctest"
)

type syncBuffer = proctest.Buffer

// recorder collects events from client callbacks.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func (r *recorder) has(e string) bool { return slices.Contains(r.all(), e) }
