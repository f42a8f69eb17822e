package ssh

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	xssh "golang.org/x/crypto/ssh"
)

// conn is one connection to the host. Its command channels are counted by the Host
// (used, limit, procs: guarded by Host.mu); kill orders go over its control channel.
type conn struct {
	h      *Host
	client *xssh.Client

	used      int       // command channels open
	limit     int       // command channels it may carry
	refusedAt time.Time // when the server last refused a channel

	idleRefusals int // channels refused in a row while no other one was open
	procs        map[*Process]struct{}
	lost         *LostError    // set when the connection broke
	dead         chan struct{} // closed when it broke (or was closed)

	closed bool // closed by the Host, not lost (guarded by Host.mu)
	// left are, per owner, the pids of the connection's commands that ended by
	// themselves: what they left in their process groups ends with their session
	// (leftover.go; guarded by Host.mu).
	left map[string][]int

	ctlMu sync.Mutex
	ctl   *control
}

// watch waits for the connection to end and reports a loss.
func (c *conn) watch() {
	defer c.h.wg.Done()
	err := c.client.Wait()
	c.h.mu.Lock()
	if c.closed {
		if c.lost == nil {
			c.lost = &LostError{Address: c.h.set.address, Cause: ErrClosed}
			close(c.dead)
		}
		c.h.mu.Unlock()
		return
	}
	c.h.mu.Unlock()
	// A server that goes away ends the stream (EOF) or resets it, whichever its kernel
	// had to: one cause, told the same way (without the socket's addresses).
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
		err = errors.New("the server closed the connection")
	}
	c.h.lost(c, err)
}

// keepalive sends a keepalive request every keepaliveMs; a connection that leaves one
// unanswered for three intervals is closed as lost.
func (c *conn) keepalive() {
	defer c.h.wg.Done()
	interval := time.Duration(c.h.set.keepaliveMs) * time.Millisecond
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-c.dead:
			return
		case <-c.h.ctx.Done():
			return
		case <-t.C:
		}
		replied := make(chan struct{})
		go func() {
			_, _, _ = c.client.SendRequest("keepalive@openssh.com", true, nil)
			close(replied)
		}()
		wait := time.NewTimer(3 * interval)
		select {
		case <-replied:
			wait.Stop()
		case <-c.dead:
			wait.Stop()
			<-replied
			return
		case <-wait.C:
			c.h.lost(c, fmt.Errorf("no reply to keepalive requests for %s", 3*interval))
			c.client.Close()
			<-replied
			return
		}
	}
}

// close ends the connection on purpose (Host.Close).
func (c *conn) close() {
	c.h.mu.Lock()
	c.closed = true
	c.h.mu.Unlock()
	c.client.Close()
}

// lostErr is the connection's LostError once it broke, else nil.
func (c *conn) lostErr() error {
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	if c.lost == nil {
		return nil
	}
	return c.lost
}

// failure turns an error of an operation on c into what the caller sees: the
// LostError when the connection broke meanwhile.
func (c *conn) failure(err error) error {
	select {
	case <-c.dead:
		return c.lostErr()
	case <-time.After(50 * time.Millisecond):
		// A broken transport is noticed by watch promptly; give it a moment so that
		// a channel failure caused by it reads as the loss it is.
	}
	if lerr := c.lostErr(); lerr != nil {
		return lerr
	}
	return err
}

// newMarker returns a random marker that no output can contain by accident.
func newMarker() string { return "dsh-ssh-" + newTag() }

// newTag returns 12 random bytes in hex: a command's tag (commandVar).
func newTag() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// control is a connection's control channel: a remote bash serving kill orders, which
// kills its connection's commands when the connection goes.
type control struct {
	ch xssh.Channel
	// registry is the remote directory where each command of the connection registers
	// itself before it starts ("" when the remote has no writable temp directory).
	registry string
	dead     chan struct{} // closed when the channel ended

	mu      sync.Mutex
	ended   bool
	pending map[uint64]chan string
}

// kill asks the remote to end process group pid (SIGTERM, SIGKILL after graceMs) and
// waits for the outcome: "none", "done" or "killed". It fails when the connection
// breaks first.
func (c *conn) kill(id uint64, pid int, birth string, graceMs int64) (string, error) {
	return c.order(id, fmt.Sprintf("k %d %d %s %d\n", id, pid, birthWord(birth), graceMs))
}

// killTagged orders killed every process whose environment holds name=tag (the `e`
// order), and waits for its outcome, as kill does.
func (c *conn) killTagged(id uint64, name, tag string, graceMs int64) (string, error) {
	return c.order(id, fmt.Sprintf("e %d %s=%s - %d\n", id, name, tag, graceMs))
}

// order writes a kill order (line, for reply id) to the control channel and waits for
// its outcome, as kill does.
func (c *conn) order(id uint64, line string) (string, error) {
	for attempt := 0; ; attempt++ {
		ctl, err := c.control()
		if err != nil {
			return "", err
		}
		reply := make(chan string, 1)
		ctl.mu.Lock()
		if ctl.ended {
			ctl.mu.Unlock()
			if attempt > 2 {
				return "", c.failure(errors.New("the control channel keeps closing"))
			}
			continue
		}
		ctl.pending[id] = reply
		_, werr := io.WriteString(ctl.ch, line)
		ctl.mu.Unlock()
		if werr != nil {
			ctl.forget(id)
			if attempt > 0 {
				return "", c.failure(werr)
			}
			continue
		}
		select {
		case outcome := <-reply:
			return outcome, nil
		case <-ctl.dead:
			select {
			case outcome := <-reply:
				return outcome, nil
			default:
			}
			if attempt > 0 {
				return "", c.failure(errors.New("the control channel closed"))
			}
		case <-c.dead:
			return "", c.lostErr()
		}
	}
}

// tell writes an order that needs no reply (unregister) to the control channel, if it
// is open; it never waits for the channel to open.
func (c *conn) tell(order string) {
	c.ctlMu.Lock()
	ctl := c.ctl
	c.ctlMu.Unlock()
	if ctl == nil {
		return
	}
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	if !ctl.ended {
		_, _ = io.WriteString(ctl.ch, order)
	}
}

// birthWord is the start-time field of a kill order ("-" when unknown: no check).
func birthWord(b string) string {
	if b == "" {
		return "-"
	}
	return b
}

func (ctl *control) forget(id uint64) {
	ctl.mu.Lock()
	delete(ctl.pending, id)
	ctl.mu.Unlock()
}

// control returns the connection's control channel, opening it when needed.
func (c *conn) control() (*control, error) {
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	if c.ctl != nil {
		select {
		case <-c.ctl.dead:
			c.ctl = nil
		default:
			return c.ctl, nil
		}
	}
	select {
	case <-c.dead:
		return nil, c.lostErr()
	default:
	}
	ch, reqs, err := c.client.OpenChannel("session", nil)
	if err != nil {
		return nil, c.failure(err)
	}
	status := make(chan int, 1) // the exit status, should the script not even start
	go func() {
		for r := range reqs {
			if code, ok := exitStatus(r); ok {
				select {
				case status <- code:
				default:
				}
			}
			if r.WantReply {
				_ = r.Reply(false, nil)
			}
		}
	}()
	go func() { _, _ = io.Copy(io.Discard, ch.Stderr()) }()
	marker := newMarker()
	ok, err := ch.SendRequest("exec", true, xssh.Marshal(struct{ Command string }{commandLine(controlScript, marker)}))
	if err != nil || !ok {
		ch.Close()
		return nil, c.failure(errExecRefused(err))
	}
	r := bufio.NewReaderSize(ch, 4096)
	// Skip whatever the login shell printed before the script's ready line,
	// `<marker> ready <registry directory>`.
	ready := []byte(marker + " ready ")
	var registry string
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			ch.Close()
			select {
			case code := <-status:
				if code == 127 { // the login shell found no bash
					return nil, spawnError("exec", "bash", syscall.ENOENT)
				}
			case <-time.After(time.Second):
			}
			return nil, c.failure(fmt.Errorf("the control channel ended before it was ready: %w", err))
		}
		if i := bytes.Index(line, ready); i >= 0 {
			registry = string(bytes.TrimSuffix(line[i+len(ready):], []byte("\n")))
			break
		}
	}
	ctl := &control{ch: ch, registry: registry, dead: make(chan struct{}), pending: map[uint64]chan string{}}
	go ctl.read(r)
	c.ctl = ctl
	return ctl, nil
}

// read dispatches the control script's replies until the channel ends.
func (ctl *control) read(r *bufio.Reader) {
	defer func() {
		ctl.mu.Lock()
		ctl.ended = true
		ctl.mu.Unlock()
		close(ctl.dead)
		ctl.ch.Close()
	}()
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			for err == bufio.ErrBufferFull {
				_, err = r.ReadSlice('\n')
			}
			continue
		}
		if err != nil {
			return
		}
		rep, perr := parseKillReply(bytes.TrimSuffix(line, []byte("\n")))
		if perr != nil {
			continue
		}
		ctl.mu.Lock()
		reply, ok := ctl.pending[rep.id]
		delete(ctl.pending, rep.id)
		ctl.mu.Unlock()
		if ok {
			reply <- rep.outcome
		}
	}
}
