package mcpserve

import (
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// input is where a stdioConn reads, and how a blocked read is ended.
type input struct {
	r       io.Reader
	unblock func() // makes a blocked read return
	restore func() // puts the descriptor back the way it was
}

// openInput prepares in for reading in the server's reader goroutine. A pipe or socket
// is read through the Go runtime's poller (made non-blocking if it is not): the reading
// goroutine then parks instead of blocking its thread in read(2), so each message goes on
// to the next goroutine without the scheduler first taking the processor back from a
// blocked thread — and a read deadline ends a read at Close. Other inputs (a terminal, a
// file, an in-memory reader) are pumped through an in-memory pipe by a goroutine of
// their own, which Close can close.
func openInput(in io.Reader) input {
	nothing := func() {}
	if f, ok := in.(*os.File); ok {
		if p, restore, ok := pollableFile(f); ok {
			return input{r: p, unblock: func() { _ = p.SetReadDeadline(time.Now()) }, restore: restore}
		}
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := io.Copy(pw, in)
		if err == nil {
			err = io.EOF
		}
		pw.CloseWithError(err)
	}()
	return input{r: pr, unblock: func() { pr.CloseWithError(io.EOF) }, restore: nothing}
}

// pollableFile returns f as a file the runtime polls, if f is a pipe or a socket.
func pollableFile(f *os.File) (_ *os.File, restore func(), ok bool) {
	nothing := func() {}
	if f.SetReadDeadline(time.Time{}) == nil {
		return f, nothing, true // already polled
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return nil, nil, false
	}
	// Not f.Fd(): it would put a polled file in blocking mode.
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, nil, false
	}
	fd := -1
	_ = rc.Control(func(raw uintptr) {
		if unix.SetNonblock(int(raw), true) == nil {
			fd = int(raw)
		}
	})
	if fd < 0 {
		return nil, nil, false
	}
	p := os.NewFile(uintptr(fd), f.Name())
	if p.SetReadDeadline(time.Time{}) != nil { // the poller refused it
		_ = unix.SetNonblock(fd, false)
		return nil, nil, false
	}
	return p, func() { _ = unix.SetNonblock(fd, false) }, true
}
