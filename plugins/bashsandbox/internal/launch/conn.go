package launch

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// Conn is one end of the control socket. Send is safe for concurrent use; Recv is for
// one reader.
type Conn struct {
	f  *os.File
	rc syscall.RawConn

	wmu sync.Mutex
	hdr [4]byte
	oob []byte
}

// NewConn wraps the unix stream socket fd (which it owns from now on; it is made
// non-blocking and close-on-exec).
func NewConn(fd int) (*Conn, error) {
	syscall.CloseOnExec(fd)
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "dsh-sandbox-control")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Conn{f: f, rc: rc, oob: make([]byte, syscall.CmsgSpace(maxFrameFDs*4))}, nil
}

// Close closes the socket; a Recv in progress returns an error.
func (c *Conn) Close() error { return c.f.Close() }

// Send writes one frame with payload, attaching fds (which stay open: the caller
// closes them).
func (c *Conn) Send(payload []byte, fds ...int) error {
	if len(payload) > maxFrame {
		return errors.New("control message too large (" + strconv.Itoa(len(payload)) + " bytes)")
	}
	if len(fds) > maxFrameFDs {
		return errors.New("too many descriptors in one control message")
	}
	frame := make([]byte, 4+len(payload))
	n := len(payload)
	frame[0], frame[1], frame[2], frame[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	copy(frame[4:], payload)
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for len(frame) > 0 {
		var sent int
		var serr error
		err := c.rc.Write(func(fd uintptr) bool {
			for {
				sent, serr = syscall.SendmsgN(int(fd), frame, oob, nil, syscall.MSG_NOSIGNAL)
				if serr == syscall.EINTR {
					continue
				}
				return serr != syscall.EAGAIN
			}
		})
		if err == nil {
			err = serr
		}
		if err != nil {
			return err
		}
		frame, oob = frame[sent:], nil // the descriptors went with the first bytes
	}
	return nil
}

// Recv reads one frame: its payload and the descriptors that came with it (they are
// close-on-exec; the caller owns them). At the end of the stream it returns io.EOF's
// stand-in, ErrClosed.
func (c *Conn) Recv() ([]byte, []int, error) {
	var fds []int
	fail := func(err error) ([]byte, []int, error) {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		return nil, nil, err
	}
	if err := c.readFull(c.hdr[:], &fds); err != nil {
		return fail(err)
	}
	n := int(c.hdr[0])<<24 | int(c.hdr[1])<<16 | int(c.hdr[2])<<8 | int(c.hdr[3])
	if n > maxFrame {
		return fail(errors.New("control message too large"))
	}
	payload := make([]byte, n)
	if err := c.readFull(payload, &fds); err != nil {
		if err == ErrClosed {
			err = errors.New("control connection closed in the middle of a message")
		}
		return fail(err)
	}
	return payload, fds, nil
}

// ErrClosed is Recv's error at the end of the stream.
var ErrClosed = errors.New("control connection closed")

func (c *Conn) readFull(buf []byte, fds *[]int) error {
	for len(buf) > 0 {
		var n, oobn, flags int
		var rerr error
		err := c.rc.Read(func(fd uintptr) bool {
			for {
				n, oobn, flags, _, rerr = syscall.Recvmsg(int(fd), buf, c.oob, syscall.MSG_CMSG_CLOEXEC)
				if rerr == syscall.EINTR {
					continue
				}
				return rerr != syscall.EAGAIN
			}
		})
		if err == nil {
			err = rerr
		}
		if err == syscall.ECONNRESET {
			// The peer died with data of ours unread: closed all the same.
			return ErrClosed
		}
		if err != nil {
			return err
		}
		if oobn > 0 {
			got, perr := parseRights(c.oob[:oobn])
			*fds = append(*fds, got...)
			if perr != nil {
				return perr
			}
		}
		if flags&syscall.MSG_CTRUNC != 0 {
			return errors.New("control message descriptors truncated")
		}
		if n == 0 {
			return ErrClosed
		}
		buf = buf[n:]
	}
	return nil
}

func parseRights(oob []byte) ([]int, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for i := range msgs {
		got, err := syscall.ParseUnixRights(&msgs[i])
		if err != nil {
			return fds, err
		}
		fds = append(fds, got...)
	}
	return fds, nil
}
