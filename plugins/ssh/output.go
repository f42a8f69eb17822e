package ssh

import (
	"bytes"
	"fmt"
	"sync"
)

// readStdout finds the start line, then captures the command's stdout.
func (p *Process) readStdout() {
	defer p.io.Done()
	bp := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(bp)
	buf := *bp
	sc := startScanner{marker: p.marker}
	started := false
	for {
		n, err := p.ch.Read(buf)
		data := buf[:n]
		if !started && n > 0 {
			line, rest, found, serr := sc.feed(data)
			data = nil
			switch {
			case serr != nil:
				p.onStart(nil, fmt.Errorf("ssh: %s: %w", p.h.set.address, serr))
				started = true
			case found:
				st, perr := parseStart(line, p.dir)
				if perr != nil {
					perr = fmt.Errorf("ssh: %s: %w", p.h.set.address, perr)
				} else if st.failed != nil {
					perr = st.failed
				}
				p.onStart(&st, perr)
				started, data = true, rest
			}
		}
		if len(data) > 0 {
			_, _ = p.stdout.Write(data)
		}
		if err != nil {
			if !started {
				p.onStart(nil, nil)
			}
			return
		}
	}
}

// readBuffers hold the readers' buffers: a channel delivers at most 32 KiB at a time.
var readBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// startScanner finds the script's marker line at the start of a stream. What precedes
// the marker was written by the login shell (its tail is kept, for diagnostics); what
// follows it up to the newline is the line; the rest belongs to the command. Memory is
// bounded whatever the login shell writes.
type startScanner struct {
	marker  []byte
	pending []byte // bytes that may still hold (the start of) the marker
	junk    []byte // the tail of what preceded the marker
}

// Bounds of the scanner: the longest line after a marker, and the junk tail kept.
const (
	maxStartLine = 256
	maxJunk      = 4096
)

// feed scans p. found: the marker's line is complete; line is what follows the marker
// up to the newline, rest what follows the newline in the bytes fed so far (both valid
// until the next feed). An error means the marker's line is longer than any start line.
func (s *startScanner) feed(p []byte) (line, rest []byte, found bool, err error) {
	s.pending = append(s.pending, p...)
	i := bytes.Index(s.pending, s.marker)
	if i < 0 {
		// Keep what could be the beginning of a marker split across reads.
		if keep := len(s.marker) - 1; len(s.pending) > keep {
			s.addJunk(s.pending[:len(s.pending)-keep])
			s.pending = append(s.pending[:0], s.pending[len(s.pending)-keep:]...)
		}
		return nil, nil, false, nil
	}
	s.addJunk(s.pending[:i])
	s.pending = append(s.pending[:0], s.pending[i:]...)
	after := s.pending[len(s.marker):]
	nl := bytes.IndexByte(after, '\n')
	switch {
	case nl >= 0:
		return after[:nl], after[nl+1:], true, nil
	case len(after) > maxStartLine:
		return nil, nil, false, errHeader
	}
	return nil, nil, false, nil
}

func (s *startScanner) addJunk(b []byte) {
	if len(b) > 0 {
		s.junk = keepTail(append(s.junk, b...), maxJunk)
	}
}

// keepTail drops all but the last n bytes of b.
func keepTail(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	return append(b[:0], b[len(b)-n:]...)
}

// onStart records the start line (st nil: stdout ended without one) or why the command
// did not start, and sends a kill order that was waiting for the pid. Only the first
// call counts; it reports whether this one was it.
func (p *Process) onStart(st *startLine, err error) (first bool) {
	p.startOnce.Do(func() {
		first = true
		p.mu.Lock()
		switch {
		case err != nil:
			p.start, p.startErr = startFailed, err
		case st != nil:
			p.start, p.pid, p.birth = startDone, st.pid, st.birth
		default:
			p.start = startFailed
		}
		killing := p.killDone != nil
		send := killing && p.start == startDone
		failed := killing && p.start == startFailed
		p.mu.Unlock()
		close(p.started)
		switch {
		case send:
			go p.sendKill()
		case failed:
			close(p.killDone)
		}
		if err != nil {
			p.ch.Close() // the command is not running: nothing more to read
		}
	})
	return first
}

// readStderr skips what the login shell wrote before the script's marker line (keeping
// its tail, to explain a failed start), then captures the command's stderr.
func (p *Process) readStderr() {
	defer p.io.Done()
	r := p.ch.Stderr()
	bp := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(bp)
	buf := *bp
	sc := startScanner{marker: p.marker}
	started := false
	for {
		n, err := r.Read(buf)
		data := buf[:n]
		if !started && n > 0 {
			_, rest, found, serr := sc.feed(data)
			data = nil
			if found || serr != nil {
				started, data = true, rest
				p.mu.Lock()
				p.preStderr = sc.junk
				p.mu.Unlock()
			}
		}
		if len(data) > 0 {
			_, _ = p.stderr.Write(data)
			p.mu.Lock()
			p.errLast = data[len(data)-1]
			p.mu.Unlock()
		}
		if err != nil {
			if !started {
				p.mu.Lock()
				p.preStderr = append(sc.junk, sc.pending...)
				p.mu.Unlock()
			}
			return
		}
	}
}

func (p *Process) writeStdin() {
	defer p.io.Done()
	if _, err := p.ch.Write(p.stdin); err == nil {
		_ = p.ch.CloseWrite()
	}
}
