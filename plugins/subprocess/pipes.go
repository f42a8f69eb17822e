package subprocess

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// pipePool keeps a few output pipes made ahead of need, while earlier commands ran, so
// that making them (pipe2, fcntl, the poller's registration) is on no call's path.
// Each pipe is used by one command only: the pool hands out pipes it made, never
// pipes handed back.
type pipePool struct {
	mu      sync.Mutex
	ready   [][2]*os.File // read end, write end
	filling bool          // a fill goroutine runs
	closed  bool
	fillers sync.WaitGroup
}

// pipesAhead is how many pipes the pool keeps: one command's stdout and stderr.
const pipesAhead = 2

// take returns a ready pipe, or makes one.
func (pp *pipePool) take() (r, w *os.File, err error) {
	pp.mu.Lock()
	if n := len(pp.ready); n > 0 {
		p := pp.ready[n-1]
		pp.ready = pp.ready[:n-1]
		pp.mu.Unlock()
		return p[0], p[1], nil
	}
	pp.mu.Unlock()
	return outputPipe()
}

// refill starts making pipes in the background, unless the pool is full, closed, or
// being filled already.
func (pp *pipePool) refill() {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.filling || pp.closed || len(pp.ready) >= pipesAhead {
		return
	}
	pp.filling = true
	pp.fillers.Add(1)
	go pp.fill()
}

func (pp *pipePool) fill() {
	defer pp.fillers.Done()
	for {
		r, w, err := outputPipe()
		pp.mu.Lock()
		if err != nil || pp.closed {
			pp.filling = false
			pp.mu.Unlock()
			if err == nil {
				r.Close()
				w.Close()
			}
			return
		}
		pp.ready = append(pp.ready, [2]*os.File{r, w})
		full := len(pp.ready) >= pipesAhead
		pp.filling = !full
		pp.mu.Unlock()
		if full {
			return
		}
	}
}

// close closes the ready pipes; once it returns, no pipe is made any more.
func (pp *pipePool) close() {
	pp.mu.Lock()
	pp.closed = true
	ready := pp.ready
	pp.ready = nil
	pp.mu.Unlock()
	pp.fillers.Wait() // a fill under way closes what it made
	for _, p := range ready {
		p[0].Close()
		p[1].Close()
	}
}

// outputPipe returns a pipe for one output stream: the read end, the parent's,
// registered with the runtime's poller (reads park the goroutine, and the drain bound
// is a read deadline), and the write end, the child's, a plain descriptor the poller
// never sees — it only goes to the child and is closed once the child has it.
func outputPipe() (r, w *os.File, err error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, err
	}
	// The read end's flags are exactly O_RDONLY: one F_SETFL makes it non-blocking.
	if _, err := unix.FcntlInt(uintptr(fds[0]), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "|0"), os.NewFile(uintptr(fds[1]), "|1"), nil
}

// devNull is the stdin of every command that has none: /dev/null, opened once.
func (s *Supervisor) devNull() (*os.File, error) {
	s.nullOnce.Do(func() { s.null, s.nullErr = os.Open(os.DevNull) })
	return s.null, s.nullErr
}
