package launch

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// The control protocol between dsh and a box: frames over a unix stream
// socket, each a 4-byte big-endian length and a payload whose first byte is the message
// type. File descriptors travel as SCM_RIGHTS attached to the frame they belong to.
//
//	dsh → box: Setup (first; fds: the pinned workspace root, if any, then the
//	               session's spill directory, if any), Start (fds:
//	               stdin, stdout, stderr, and the command's cgroup when it has one),
//	               Release
//	box → dsh: Ready or Failed (the answer to Setup), Started (fd: the leader's
//	               pidfd) or Failed (the answer to a Start), Exited
const (
	MsgSetup    byte = 1
	MsgReady    byte = 2
	MsgStart    byte = 3
	MsgStarted  byte = 4
	MsgFailed   byte = 5
	MsgExited   byte = 6
	MsgRelease  byte = 7
	maxFrame         = 64 << 20 // larger than any argv+environment the kernel accepts
	maxFrameFDs      = 8
)

// Setup is the first message: how the box builds its world. It is sent
// once; every command then runs in what it made.
type Setup struct {
	// Namespaces: the box was started in new user, mount, PID, IPC and UTS
	// namespaces (and a network namespace when Network is NetworkDeny) and builds its
	// mount tree; false is the Landlock-only mode.
	Namespaces bool
	// Network is NetworkDeny or NetworkAllow.
	Network string
	// Workspace is the canonical workspace root as pinned at session start (its
	// directory travels as an O_PATH descriptor with the message); "" for none.
	Workspace string
	// WritableRoots are further directories bound read-write (configured roots).
	WritableRoots []string
	// TempDir is the host path of the session's private temp dir: bound at /tmp
	// (namespaces), or used as is (Landlock-only).
	TempDir string
	// Stage is an empty host directory on which the new root is assembled (namespaces
	// only).
	Stage string
	// MaskDirs are directories masked with an empty read-only tmpfs (namespaces only):
	// e.g. the harness's spill directory.
	MaskDirs []string
	// Protect are paths bound read-only over themselves, and kept so (namespaces only).
	Protect []string
	// Spill is the host path of the session's own spill directory (its directory
	// travels as a descriptor with the message, after the workspace's), shown read-only
	// at that same path once the masked directories are covered (namespaces only); ""
	// for none.
	Spill string
	// MaskFiles are files masked with an empty read-only file wherever a command could read
	// them (the harness's secrets, e.g. its HTTP bearer token; namespaces only).
	MaskFiles []string
}

// Start asks the box to start one command, confined to Policy.
type Start struct {
	ID     uint64
	Policy Policy
	// Path is the program (absolute), Argv its argv, Dir its working directory, Env its
	// complete environment.
	Path string
	Argv []string
	Dir  string
	Env  []string
	// Protect are protected paths that must be read-only before the command starts
	// (namespaces only; one that appeared since the setup is bound now).
	Protect []string
	// MaskFiles are files that must be masked before the command starts (namespaces only;
	// one that appeared, or was replaced, since it was last masked is masked now).
	MaskFiles []string
	// Cgroup: the fourth descriptor is the command's cgroup directory.
	Cgroup bool
}

// Reply is a message from the box: Ready, Started, Failed or Exited.
type Reply struct {
	Type byte
	ID   uint64
	// Pid is the leader's pid in the box's PID namespace (Started).
	Pid int
	// Code and Signal: how the leader ended (Exited; Signal 0 for an exit).
	Code, Signal int
	// Errno, Op and Path describe a failed start (Failed): the step ("chdir", "exec")
	// and the file; Message says what failed otherwise (a Setup, the confinement).
	Errno   int
	Op      string
	Path    string
	Message string
	// LaunchFailed (Started): the command could not be confined, and the launcher's failure mode
	// was started in its place — what tells dsh that the command did not run (a
	// command can write the failure line and exit 125 too).
	LaunchFailed bool
}

// Release tells the box to reap the leader of command ID.
type Release struct{ ID uint64 }

// Encode returns the frame payload of m.
func (m *Setup) Encode() []byte {
	var w wbuf
	w.b = append(w.b, MsgSetup)
	w.bool(m.Namespaces)
	w.str(m.Network)
	w.str(m.Workspace)
	w.strs(m.WritableRoots)
	w.str(m.TempDir)
	w.str(m.Stage)
	w.strs(m.MaskDirs)
	w.strs(m.Protect)
	w.str(m.Spill)
	w.strs(m.MaskFiles)
	return w.b
}

// Encode returns the frame payload of m.
func (m *Start) Encode() []byte {
	var w wbuf
	w.b = append(w.b, MsgStart)
	w.uint(m.ID)
	w.str(m.Policy.Mode)
	w.str(m.Policy.WorkspaceRoot)
	w.strs(m.Policy.WritableRoots)
	w.str(m.Policy.Network)
	w.str(m.Path)
	w.strs(m.Argv)
	w.str(m.Dir)
	w.strs(m.Env)
	w.strs(m.Protect)
	w.strs(m.MaskFiles)
	w.bool(m.Cgroup)
	return w.b
}

// Encode returns the frame payload of m.
func (m Release) Encode() []byte {
	var w wbuf
	w.b = append(w.b, MsgRelease)
	w.uint(m.ID)
	return w.b
}

// Encode returns the frame payload of m.
func (m *Reply) Encode() []byte {
	var w wbuf
	w.b = append(w.b, m.Type)
	w.uint(m.ID)
	w.int(m.Pid)
	w.int(m.Code)
	w.int(m.Signal)
	w.int(m.Errno)
	w.str(m.Op)
	w.str(m.Path)
	w.str(m.Message)
	w.bool(m.LaunchFailed)
	return w.b
}

// DecodeSetup decodes a Setup payload.
func DecodeSetup(b []byte) (Setup, error) {
	r := rbuf{b: b}
	r.kind(MsgSetup)
	m := Setup{
		Namespaces:    r.bool(),
		Network:       r.str(),
		Workspace:     r.str(),
		WritableRoots: r.strs(),
		TempDir:       r.str(),
		Stage:         r.str(),
		MaskDirs:      r.strs(),
		Protect:       r.strs(),
		Spill:         r.str(),
		MaskFiles:     r.strs(),
	}
	return m, r.done("setup")
}

// DecodeStart decodes a Start payload.
func DecodeStart(b []byte) (Start, error) {
	r := rbuf{b: b}
	r.kind(MsgStart)
	m := Start{ID: r.uint()}
	m.Policy = Policy{Mode: r.str(), WorkspaceRoot: r.str(), WritableRoots: r.strs(), Network: r.str()}
	m.Path = r.str()
	m.Argv = r.strs()
	m.Dir = r.str()
	m.Env = r.strs()
	m.Protect = r.strs()
	m.MaskFiles = r.strs()
	m.Cgroup = r.bool()
	return m, r.done("start")
}

// DecodeRelease decodes a Release payload.
func DecodeRelease(b []byte) (Release, error) {
	r := rbuf{b: b}
	r.kind(MsgRelease)
	m := Release{ID: r.uint()}
	return m, r.done("release")
}

// DecodeReply decodes a Reply payload (Ready, Started, Failed or Exited).
func DecodeReply(b []byte) (Reply, error) {
	r := rbuf{b: b}
	var m Reply
	if len(b) > 0 {
		m.Type = b[0]
		switch m.Type {
		case MsgReady, MsgStarted, MsgFailed, MsgExited:
		default:
			return Reply{}, errors.New("reply: unknown message type " + strconv.Itoa(int(m.Type)))
		}
	}
	r.kind(m.Type)
	m.ID = r.uint()
	m.Pid = r.int()
	m.Code = r.int()
	m.Signal = r.int()
	m.Errno = r.int()
	m.Op = r.str()
	m.Path = r.str()
	m.Message = r.str()
	m.LaunchFailed = r.bool()
	return m, r.done("reply")
}

// wbuf builds a payload: unsigned varints, zigzag varints, length-prefixed strings.
type wbuf struct{ b []byte }

func (w *wbuf) uint(v uint64) {
	for v >= 0x80 {
		w.b = append(w.b, byte(v)|0x80)
		v >>= 7
	}
	w.b = append(w.b, byte(v))
}

func (w *wbuf) int(v int) { w.uint(uint64(v<<1) ^ uint64(v>>63)) }

func (w *wbuf) bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

func (w *wbuf) str(s string) {
	w.uint(uint64(len(s)))
	w.b = append(w.b, s...)
}

func (w *wbuf) strs(ss []string) {
	w.uint(uint64(len(ss)))
	for _, s := range ss {
		w.str(s)
	}
}

// rbuf reads a payload; the first error sticks and later reads return zero values.
type rbuf struct {
	b   []byte
	err error
}

var errShort = errors.New("truncated message")

func (r *rbuf) kind(want byte) {
	if len(r.b) == 0 || r.b[0] != want {
		r.err = errors.New("unexpected message type")
		return
	}
	r.b = r.b[1:]
}

func (r *rbuf) uint() uint64 {
	if r.err != nil {
		return 0
	}
	var v uint64
	for i := 0; i < 10; i++ {
		if i >= len(r.b) {
			r.err = errShort
			return 0
		}
		c := r.b[i]
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if i == 9 && c > 1 {
				break
			}
			if c == 0 && i > 0 {
				r.err = errors.New("non-canonical varint")
				return 0
			}
			r.b = r.b[i+1:]
			return v
		}
	}
	r.err = errors.New("varint overflow")
	return 0
}

func (r *rbuf) int() int {
	u := r.uint()
	return int(int64(u>>1) ^ -int64(u&1))
}

func (r *rbuf) bool() bool {
	if r.err != nil {
		return false
	}
	if len(r.b) == 0 {
		r.err = errShort
		return false
	}
	c := r.b[0]
	r.b = r.b[1:]
	if c > 1 {
		r.err = errors.New("invalid boolean")
	}
	return c == 1
}

func (r *rbuf) str() string {
	n := r.uint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.err = errShort
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *rbuf) strs() []string {
	n := r.uint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) { // every string takes at least one byte
		r.err = errShort
		return nil
	}
	var out []string
	if n > 0 {
		out = make([]string, 0, n)
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		out = append(out, r.str())
	}
	return out
}

func (r *rbuf) done(what string) error {
	if r.err == nil && len(r.b) != 0 {
		r.err = errors.New("trailing bytes")
	}
	if r.err != nil {
		return errors.New(what + ": " + r.err.Error())
	}
	return nil
}

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
