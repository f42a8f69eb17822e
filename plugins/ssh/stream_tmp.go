package ssh

import (
	"sync"

	"github.com/dsh-dev/dsh/plugins/subprocess"
)

// Stream is a stand-in for the subprocess spool's stream (bounded tail, no spill yet).
// TODO(process branch): replace with subprocess.Spool streams.
type Stream struct {
	limit int64
	mu    sync.Mutex
	buf   []byte
	total int64
}

func newStream(c subprocess.Capture) *Stream { return &Stream{limit: c.MaxBytes} }

func (s *Stream) write(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total += int64(len(p))
	s.buf = append(s.buf, p...)
	if over := int64(len(s.buf)) - s.limit; over > 0 {
		s.buf = append(s.buf[:0], s.buf[over:]...)
	}
}

func (s *Stream) close() {}

// Since returns what was captured from offset off on.
func (s *Stream) Since(off int64) subprocess.Chunk {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := s.total - int64(len(s.buf))
	lossy := off < start
	if lossy {
		off = start
	}
	if off >= s.total {
		return subprocess.Chunk{Next: s.total, Lossy: lossy}
	}
	return subprocess.Chunk{Data: append([]byte(nil), s.buf[off-start:]...), Next: s.total, Lossy: lossy}
}

// Output returns the stream as it stands.
func (s *Stream) Output() subprocess.Output {
	s.mu.Lock()
	defer s.mu.Unlock()
	return subprocess.Output{Text: string(s.buf), Truncated: s.total > int64(len(s.buf)), Bytes: s.total}
}

// SpillPath is "" in the stand-in.
func (s *Stream) SpillPath() string { return "" }
