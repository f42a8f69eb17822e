package subprocess

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
)

// DefaultSpillBudgetBytes is the default total size of a Supervisor's spill files (1 GiB).
const DefaultSpillBudgetBytes = 1 << 30

// spillFile is one spill file. Its path is reported only while it is not gone; once
// gone (deleted, or about to be) it is never reported again.
type spillFile struct {
	path string
	// size is the bytes reserved for the file in the budget: owned by the stream's
	// writer while it spills, then (once retired) by the budget under its lock.
	size int64
	gone atomic.Bool
}

// reportedPath is the path to report for f: "" when there is no file or it is gone.
func (f *spillFile) reportedPath() string {
	if f == nil || f.gone.Load() {
		return ""
	}
	return f.path
}

// spillBudget bounds the total size of one Supervisor's spill files. Every byte is
// reserved before it is written, so the files on disk never hold more than limit.
// The hot path is one compare-and-swap; the lock is taken only when the budget is
// exhausted, to reclaim the files of finished processes.
type spillBudget struct {
	limit int64
	used  atomic.Int64
	log   *slog.Logger

	mu          sync.Mutex
	retired     []*spillFile // complete files of finished processes, oldest first
	reclaimable int64        // sum of the retired files' sizes
	closed      bool
}

func newSpillBudget(limit int64, log *slog.Logger) *spillBudget {
	if limit <= 0 {
		limit = DefaultSpillBudgetBytes
	}
	return &spillBudget{limit: limit, log: log}
}

// tryReserve takes n bytes of the budget if they fit.
func (b *spillBudget) tryReserve(n int64) bool {
	for {
		cur := b.used.Load()
		if cur > b.limit-n {
			return false
		}
		if b.used.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// reserve takes n bytes of the budget for a spill write. When they do not fit, the
// files of finished processes are deleted, oldest first, until they do. Before each
// deletion it checks that deleting every finished file would make room; when it would
// not, reserve fails without deleting more. Writers reserve without the lock, so bytes
// freed by one deletion may be taken by another stream meanwhile: reserve can then
// delete some files and still fail (the bytes went to output that needed them). A nil
// budget is unlimited.
func (b *spillBudget) reserve(n int64) bool {
	if b == nil || b.tryReserve(n) {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		if b.tryReserve(n) {
			return true
		}
		if len(b.retired) == 0 || b.used.Load()-b.reclaimable > b.limit-n {
			return false
		}
		f := b.retired[0]
		b.retired[0] = nil
		b.retired = b.retired[1:]
		b.reclaimable -= f.size
		b.delete(f)
	}
}

// release returns n bytes to the budget.
func (b *spillBudget) release(n int64) {
	if b != nil && n != 0 {
		b.used.Add(-n)
	}
}

// delete removes f's file and returns its bytes to the budget. f is marked gone first,
// so that no reader is given its path once the file may be missing. If the file cannot
// be removed its bytes stay reserved: the budget must never undercount the disk.
func (b *spillBudget) delete(f *spillFile) {
	if !f.gone.CompareAndSwap(false, true) {
		return
	}
	if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		if b != nil && b.log != nil {
			b.log.Warn("subprocess: cannot remove a spill file", "err", err)
		}
		return
	}
	b.release(f.size)
}

// retire hands the complete spill files of a finished process to the budget, which
// may delete them to make room for newer output. Nil files are skipped.
func (b *spillBudget) retire(files ...*spillFile) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, f := range files {
		if f == nil {
			continue
		}
		if b.closed {
			f.gone.Store(true) // the directory is being removed
			continue
		}
		b.retired = append(b.retired, f)
		b.reclaimable += f.size
	}
}

// close marks every retired file gone: the Supervisor is about to remove the whole
// spill directory.
func (b *spillBudget) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, f := range b.retired {
		f.gone.Store(true)
	}
	b.retired, b.reclaimable = nil, 0
}
