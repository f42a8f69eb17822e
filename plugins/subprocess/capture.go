package subprocess

import (
	"os"
	"strings"
	"sync"
)

// Capture bounds one captured output stream.
type Capture struct {
	// MaxBytes is how much of the stream's tail is kept in memory (> 0).
	MaxBytes int64
	// SpillMaxBytes caps the spill file that holds the complete stream once it no longer
	// fits in memory; a stream longer than this keeps only its tail. 0 disables spilling.
	SpillMaxBytes int64
}

// Output is a captured stream as it stands.
type Output struct {
	// Text is the retained tail (the whole stream unless Truncated).
	Text string
	// Truncated is true when any byte was dropped from memory.
	Truncated bool
	// SpillPath names a file holding the complete stream, when one exists.
	SpillPath string
	// Bytes is the length of the whole stream so far.
	Bytes int64
}

// Chunk is the result of an offset-based read of a stream.
type Chunk struct {
	// Data holds the bytes from the requested offset (or, when Lossy, from the start of
	// the retained tail) to the end of what has been captured.
	Data []byte
	// Next is the offset to read from next time (the stream length at this read).
	Next int64
	// Lossy is true when the requested offset was no longer retained in memory.
	Lossy bool
}

// Stream is one captured output stream of a Process. Its methods are safe for
// concurrent use while the process runs.
type Stream struct {
	limits Capture
	budget *spillBudget                     // the Supervisor's; nil = unlimited
	open   func() (*os.File, string, error) // creates the spill file

	// spill is owned by the goroutine that writes the stream, then by finish.
	spill *os.File

	mu         sync.Mutex
	buf        []byte // ring: grows to limits.MaxBytes, then wraps
	head       int    // index of the oldest byte once the ring is full
	total      int64
	spillTried bool
	// file is set while the spill file holds everything captured so far. Once a
	// stream's file is dropped it never spills again, so a path, once withdrawn, is
	// never reported again; the budget may also delete the file of a finished
	// process (file.gone), which withdraws its path too.
	file *spillFile
}

func newStream(limits Capture, budget *spillBudget, open func() (*os.File, string, error)) *Stream {
	return &Stream{limits: limits, budget: budget, open: open}
}

// write appends p to the stream: the ring keeps the tail; the spill file, once started,
// gets everything (until the spill cap, or until the spill budget has no room left, when
// it is deleted).
func (s *Stream) write(p []byte) {
	n := int64(len(p))
	s.mu.Lock()
	total := s.total + n
	var drop *os.File
	var dropFile *spillFile
	switch {
	case total > s.limits.MaxBytes && !s.spillTried:
		// First overflow: nothing was dropped yet, so the ring holds the whole stream.
		s.spillTried = true
		if s.limits.SpillMaxBytes > 0 && total <= s.limits.SpillMaxBytes {
			s.startSpillLocked()
		}
	case s.spill != nil && total > s.limits.SpillMaxBytes:
		drop, dropFile = s.spill, s.file
		s.spill, s.file = nil, nil
	}
	s.ringWrite(p)
	s.total = total
	f, sf := s.spill, s.file
	s.mu.Unlock()

	if drop != nil {
		drop.Close()
		s.budget.delete(dropFile)
		return
	}
	if f != nil {
		// Only this goroutine writes the file, so sf.size needs no lock.
		if !s.budget.reserve(n) {
			s.abandonSpill()
			return
		}
		sf.size += n
		if _, err := f.Write(p); err != nil {
			s.abandonSpill()
		}
	}
}

// startSpillLocked creates the spill file and writes the stream so far into it, if the
// budget has room for it.
func (s *Stream) startSpillLocked() {
	n := int64(len(s.buf))
	if !s.budget.reserve(n) {
		return
	}
	f, path, err := s.open()
	if err != nil {
		s.budget.release(n)
		return
	}
	sf := &spillFile{path: path, size: n}
	if _, err := f.Write(s.buf); err != nil {
		f.Close()
		s.budget.delete(sf)
		return
	}
	s.spill, s.file = f, sf
}

// abandonSpill deletes an incomplete spill file (a failed write, no room in the budget).
func (s *Stream) abandonSpill() {
	s.mu.Lock()
	f, sf := s.spill, s.file
	s.spill, s.file = nil, nil
	s.mu.Unlock()
	if f != nil {
		f.Close()
		s.budget.delete(sf)
	}
}

// finish closes the spill file once the stream has ended. It returns the file when it
// holds the complete stream, for the budget to retire.
func (s *Stream) finish() *spillFile {
	s.mu.Lock()
	f, sf := s.spill, s.file
	s.spill = nil
	s.mu.Unlock()
	if f == nil {
		return nil
	}
	f.Close()
	return sf
}

func (s *Stream) ringWrite(p []byte) {
	limit := int(s.limits.MaxBytes)
	if len(p) >= limit {
		if cap(s.buf) < limit {
			s.buf = make([]byte, limit)
		}
		s.buf = s.buf[:limit]
		copy(s.buf, p[len(p)-limit:])
		s.head = 0
		return
	}
	if len(s.buf) < limit {
		room := limit - len(s.buf)
		if len(p) <= room {
			s.buf = appendBounded(s.buf, p, limit)
			return
		}
		s.buf = appendBounded(s.buf, p[:room], limit)
		p = p[room:]
		s.head = 0
	}
	n := copy(s.buf[s.head:], p)
	if n < len(p) {
		s.head = copy(s.buf, p[n:])
	} else if s.head += n; s.head == limit {
		s.head = 0
	}
}

// appendBounded appends like append but never grows capacity beyond limit.
func appendBounded(b, p []byte, limit int) []byte {
	if need := len(b) + len(p); need > cap(b) {
		c := max(2*cap(b), need, 512)
		c = min(c, limit)
		nb := make([]byte, len(b), c)
		copy(nb, b)
		b = nb
	}
	return append(b, p...)
}

// retainedLocked copies the retained bytes from logical offset off (relative to the
// oldest retained byte) into dst, which must have room for them.
func (s *Stream) retainedLocked(off int, dst []byte) {
	idx := off
	if len(s.buf) == int(s.limits.MaxBytes) {
		idx = (s.head + off) % len(s.buf)
	}
	c := copy(dst, s.buf[idx:])
	copy(dst[c:], s.buf[:len(dst)-c])
}

// Since returns what was captured from offset off on. A read starting before the
// retained window is lossy and returns the whole retained tail.
func (s *Stream) Since(off int64) Chunk {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := s.total - int64(len(s.buf))
	lossy := off < start
	if lossy {
		off = start
	}
	if off >= s.total {
		return Chunk{Next: s.total, Lossy: lossy}
	}
	data := make([]byte, s.total-off)
	s.retainedLocked(int(off-start), data)
	return Chunk{Data: data, Next: s.total, Lossy: lossy}
}

// Output returns the stream as it stands: its retained tail, whether bytes were dropped
// and the spill file, if one holds the complete stream.
func (s *Stream) Output() Output {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	if n := len(s.buf); n > 0 {
		b.Grow(n)
		if len(s.buf) == int(s.limits.MaxBytes) && s.head > 0 {
			b.Write(s.buf[s.head:])
			b.Write(s.buf[:s.head])
		} else {
			b.Write(s.buf)
		}
	}
	return Output{
		Text:      b.String(),
		Truncated: s.total > int64(len(s.buf)),
		SpillPath: s.file.reportedPath(),
		Bytes:     s.total,
	}
}

// Len is the length of the whole stream so far.
func (s *Stream) Len() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// SpillPath is the spill file holding everything captured so far, or "" (no spill,
// or the file was deleted: past the spill cap, or to keep within the spill budget).
func (s *Stream) SpillPath() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.file.reportedPath()
}
