package proc

import (
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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

// Stream is one captured output stream: a bounded in-memory tail and, once that
// overflows, a spill file holding the whole stream (see Capture). A Process has two;
// Spool.NewStream makes others. Write and Close are for the one producer of the stream;
// the reading methods are safe for concurrent use at any time.
type Stream struct {
	limits   Capture
	sp       *Spool // nil: never spills
	owner    *spoolOwner
	fileName string

	// wmu serialises Write and Close; spill, pending and closed are owned under it.
	wmu   sync.Mutex
	spill *os.File
	// pending holds bytes on their way to the spill file, written in spillChunk blocks:
	// a producer's small writes would otherwise each cost a file write (and an inode
	// update). It is flushed before the path is reported, so the file holds everything
	// captured whenever someone is told about it.
	pending []byte
	closed  bool

	mu         sync.Mutex
	buf        []byte // ring: grows to limits.MaxBytes, then wraps
	head       int    // index of the oldest byte once the ring is full
	total      int64
	spillTried bool
	// file is set while the spill file holds everything captured so far. Once a
	// stream's file is dropped it never spills again, so a path, once withdrawn, is
	// never reported again; the spool may also delete the file of a closed stream
	// (file.gone), which withdraws its path too.
	file *spillFile

	lastWrite atomic.Int64 // unix nanoseconds of the last write with bytes; 0 before
}

// Write appends p to the stream: the tail keeps the last MaxBytes bytes; the spill file,
// once started, gets everything (until SpillMaxBytes, or until the spool's budget has
// no room left, when it is deleted). It never fails: trouble with the spill file (no
// room, a disk error, a spill directory that was tampered with) leaves the stream with
// its tail only. Writes after Close are discarded.
func (s *Stream) Write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if !s.closed {
		s.write(p)
	}
	return len(p), nil
}

// write is Write under wmu.
func (s *Stream) write(p []byte) {
	n := int64(len(p))
	s.mu.Lock()
	total := s.total + n
	drop := false
	switch {
	case total > s.limits.MaxBytes && !s.spillTried:
		// First overflow: nothing was dropped yet, so the ring holds the whole stream.
		s.spillTried = true
		if s.sp != nil && s.limits.SpillMaxBytes > 0 && total <= s.limits.SpillMaxBytes {
			s.startSpillLocked()
		}
	case s.spill != nil && total > s.limits.SpillMaxBytes:
		drop = true
	}
	s.ringWrite(p)
	s.total = total
	if n > 0 {
		s.lastWrite.Store(time.Now().UnixNano())
	}
	s.mu.Unlock()

	switch {
	case s.spill == nil:
	case drop, s.file.gone.Load(), !s.sp.reserve(n, s.owner):
		s.dropSpill()
	default:
		s.file.size += n // only the writer touches size while the stream is open
		if !s.spillWrite(p) {
			s.dropSpill()
		}
	}
}

// spillChunk is the size of the blocks in which the spill file is written.
const spillChunk = 256 << 10

// spillWrite queues p for the spill file, writing full blocks; false when the file
// write failed.
func (s *Stream) spillWrite(p []byte) bool {
	if len(s.pending)+len(p) > spillChunk && !s.flushSpill() {
		return false
	}
	if len(p) >= spillChunk {
		_, err := s.spill.Write(p)
		return err == nil
	}
	if s.pending == nil {
		s.pending = make([]byte, 0, spillChunk)
	}
	s.pending = append(s.pending, p...)
	return true
}

// flushSpill writes the queued bytes to the spill file; false when that failed.
func (s *Stream) flushSpill() bool {
	if len(s.pending) == 0 {
		return true
	}
	_, err := s.spill.Write(s.pending)
	s.pending = s.pending[:0]
	return err == nil
}

// syncSpill brings the spill file up to date (for a reader about to be given its path).
func (s *Stream) syncSpill() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.spill != nil && !s.flushSpill() {
		s.dropSpill()
	}
}

// startSpillLocked creates the spill file and writes the stream so far into it, if the
// budget has room for it.
func (s *Stream) startSpillLocked() {
	n := int64(len(s.buf))
	if !s.sp.reserve(n, s.owner) {
		return
	}
	f, sf, err := s.sp.create(s.owner, s.fileName)
	if err != nil {
		s.sp.release(n)
		return
	}
	sf.size = n
	if _, err := f.Write(s.buf); err != nil {
		f.Close()
		s.sp.delete(sf)
		return
	}
	s.spill, s.file = f, sf
}

// dropSpill deletes an incomplete spill file (past the cap, a failed write, no room in
// the budget, a closed spool).
func (s *Stream) dropSpill() {
	s.mu.Lock()
	sf := s.file
	s.file = nil
	s.mu.Unlock()
	s.spill.Close()
	s.spill = nil
	s.pending = nil
	s.sp.delete(sf)
}

// Close ends the stream: its spill file is closed and, if it holds the complete stream,
// handed to the spool's budget (which may delete it to make room for newer output, or
// at once when its owner has ended). The tail and a kept spill file stay readable.
// Close is idempotent.
func (s *Stream) Close() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	var sf *spillFile
	if s.spill != nil && !s.flushSpill() {
		s.dropSpill()
	}
	s.pending = nil
	if s.spill != nil {
		s.spill.Close()
		s.spill = nil
		s.mu.Lock()
		sf = s.file
		s.mu.Unlock()
	}
	if s.sp != nil {
		s.sp.closeStream(s.owner, sf)
	}
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
	s.syncSpill()
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

// LastWrite is when the stream last received bytes: the zero time before the first.
func (s *Stream) LastWrite() time.Time {
	if ns := s.lastWrite.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
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
	s.syncSpill()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.file.reportedPath()
}
