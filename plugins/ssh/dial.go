package ssh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	xssh "golang.org/x/crypto/ssh"
)

// dialTimeout bounds one connection attempt: TCP connect, key exchange, login.
const dialTimeout = 15 * time.Second

// Backoff of the background reconnection after a connection was lost or a dial failed.
const (
	backoffMin = 250 * time.Millisecond
	backoffMax = 30 * time.Second
)

// Connect opens the first connection. A host key that is not trusted, or a login the
// server refuses, is returned as an error (the row fails to activate); a network
// failure is not: the Host then keeps reconnecting in the background, with backoff,
// and commands fail until it succeeds.
func (h *Host) Connect(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return ErrClosed
	}
	seq := h.startDialLocked()
	h.mu.Unlock()
	for {
		h.mu.Lock()
		if h.lastDial.seq >= seq {
			err := h.lastDial.err
			h.mu.Unlock()
			if fatal(err) {
				return err
			}
			if err != nil {
				h.log.Warn("ssh: cannot connect; retrying in the background", "err", err)
			}
			return nil
		}
		ch := h.changed
		h.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("ssh: connecting to %s: %w", h.set.address, context.Cause(ctx))
		}
	}
}

// fatal reports whether a dial failure is a configuration problem that retrying
// cannot fix.
func fatal(err error) bool {
	var hk *HostKeyError
	var le *LoginError
	return errors.As(err, &hk) || errors.As(err, &le)
}

// startDialLocked starts a dial in the background and returns its sequence number.
func (h *Host) startDialLocked() uint64 {
	h.dialing = true
	h.dialsStarted++
	seq := h.dialsStarted
	h.setStateLocked()
	h.wg.Add(1)
	go h.dial(seq)
	return seq
}

func (h *Host) dial(seq uint64) {
	defer h.wg.Done()
	ctx, cancel := context.WithTimeout(h.ctx, dialTimeout)
	defer cancel()
	c, err := h.connect(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dialing, h.handshaking = false, false
	h.lastDial.seq, h.lastDial.err = seq, err
	switch {
	case err == nil && h.closed:
		c.client.Close()
	case err == nil:
		h.conns = append(h.conns, c)
		h.failures = 0
		h.cause = nil
		h.wg.Add(2)
		go c.watch()
		go c.keepalive()
		// The control channel is opened now, so that the first kill does not wait for
		// a login shell to start.
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			_, _ = c.control()
		}()
		h.flushOrphansLocked()
	default:
		h.failures++
		if len(h.conns) == 0 {
			if h.cause == nil {
				h.cause = err // what took the host away stays the headline
			}
			h.reconnectLocked()
		}
	}
	h.notifyLocked()
}

// connect dials the host, checks its key and logs in.
func (h *Host) connect(ctx context.Context) (*conn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	nc, err := d.DialContext(ctx, "tcp", h.set.address)
	if err != nil {
		return nil, fmt.Errorf("ssh: cannot connect to %s: %w", h.set.address, err)
	}
	h.mu.Lock()
	h.handshaking = true
	h.mu.Unlock()
	deadline, _ := ctx.Deadline()
	_ = nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	cc, chans, reqs, err := xssh.NewClientConn(nc, h.set.address, h.client)
	stopped := stop()
	if err != nil {
		nc.Close()
		var hk *HostKeyError
		if errors.As(err, &hk) {
			return nil, hk
		}
		if !stopped {
			err = context.Cause(ctx)
		}
		if isAuthFailure(err) {
			return nil, &LoginError{Address: h.set.address, User: h.set.user, Err: err}
		}
		return nil, fmt.Errorf("ssh: cannot connect to %s: %w", h.set.address, err)
	}
	_ = nc.SetDeadline(time.Time{})
	client := xssh.NewClient(cc, chans, reqs)
	return &conn{h: h, client: client, limit: channelsPerConnection - 1, procs: map[*Process]struct{}{}, dead: make(chan struct{})}, nil
}

// isAuthFailure recognises the library's handshake error for a refused login (it has
// no type of its own).
func isAuthFailure(err error) bool {
	return strings.Contains(err.Error(), "ssh: unable to authenticate, ")
}

// reconnectLocked starts the background reconnection, unless it runs.
func (h *Host) reconnectLocked() {
	if h.reconnecting || h.closed {
		return
	}
	h.reconnecting = true
	h.wg.Add(1)
	go h.reconnect()
}

// reconnect redials with exponential backoff until a connection is up or the Host
// closes. Calls do not wait for it: a call that finds no connection dials at once.
func (h *Host) reconnect() {
	defer h.wg.Done()
	for {
		h.mu.Lock()
		if h.closed || len(h.conns) > 0 {
			h.reconnecting = false
			h.mu.Unlock()
			return
		}
		delay := backoffMin << min(max(h.failures-1, 0), 16)
		delay = min(delay, backoffMax)
		h.mu.Unlock()
		t := time.NewTimer(delay)
		select {
		case <-h.ctx.Done():
			t.Stop()
			h.mu.Lock()
			h.reconnecting = false
			h.mu.Unlock()
			return
		case <-t.C:
		}
		h.mu.Lock()
		var seq uint64
		if !h.closed && len(h.conns) == 0 && !h.dialing {
			seq = h.startDialLocked()
		}
		h.mu.Unlock()
		if seq != 0 {
			h.waitDial(seq)
		}
	}
}

// waitDial waits until dial seq has finished (or the Host closes).
func (h *Host) waitDial(seq uint64) {
	for {
		h.mu.Lock()
		if h.lastDial.seq >= seq || h.closed {
			h.mu.Unlock()
			return
		}
		ch := h.changed
		h.mu.Unlock()
		select {
		case <-ch:
		case <-h.ctx.Done():
			return
		}
	}
}

// notifyLocked wakes every waiter and refreshes the status detail.
func (h *Host) notifyLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
	h.setStateLocked()
}

// setStateLocked reports the connection state through OnState when it changed.
func (h *Host) setStateLocked() {
	who := h.set.user + "@" + h.set.address
	var d string
	switch {
	case h.closed:
		d = "closed"
	case len(h.conns) > 0:
		d = fmt.Sprintf("connected to %s (%d %s, %d %s running)", who,
			len(h.conns), plural(len(h.conns), "connection", "connections"),
			len(h.live), plural(len(h.live), "command", "commands"))
	case h.cause != nil:
		d = fmt.Sprintf("disconnected from %s: %v", who, h.cause)
		if last := h.lastDial.err; last != nil && last != h.cause {
			d += fmt.Sprintf("; %d %s to reconnect failed (last: %v)", h.failures, plural(h.failures, "attempt", "attempts"), last)
		}
		d += "; reconnecting with backoff"
	case h.dialing:
		d = "connecting to " + who
	default:
		d = "not connected to " + who
	}
	if len(h.orphans) > 0 {
		d += "; " + strconv.Itoa(len(h.orphans)) + " remote " + plural(len(h.orphans), "command", "commands") + " to kill when reconnected"
	}
	if d == h.detail {
		return
	}
	h.detail = d
	if h.onState != nil {
		h.onState(d)
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// State is the current one-line connection state (the row's status detail).
func (h *Host) State() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.detail
}
