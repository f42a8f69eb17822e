package ssh

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// channelsPerConnection is how many session channels one connection carries: OpenSSH's
// default MaxSessions (10). One is the connection's control channel; a server that
// allows fewer is detected when it refuses a channel.
const channelsPerConnection = 10

// acquire reserves a command channel on the least loaded connection, dialing a new
// connection when every connection is busy and fewer than maxConnections exist. It
// waits (bounded by ctx and deadline) when every connection is full; it fails when no
// connection is up and a dial started after the call arrived failed. A deadline that
// passes while no connection is up is a ConnectTimeoutError: the host, not the channels,
// kept the command from starting.
func (h *Host) acquire(ctx context.Context, deadline time.Time) (*conn, error) {
	var timer <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timer = t.C
	}
	h.mu.Lock()
	after := h.dialsStarted
	h.mu.Unlock()
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, ErrClosed
		}
		var best *conn
		for _, c := range h.conns {
			if c.limit < channelsPerConnection-1 && time.Since(c.refusedAt) > refusalMemory {
				c.limit++
				c.refusedAt = time.Now()
			}
			if c.used < c.limit && (best == nil || c.used < best.used) {
				best = c
			}
		}
		if best == nil && len(h.conns) == 0 && h.lastDial.seq > after && h.lastDial.err != nil && !h.dialing {
			// A dial made after this call arrived failed: no host to run on.
			err := h.lastDial.err
			h.mu.Unlock()
			return nil, err
		}
		if !h.dialing && len(h.conns) < h.set.maxConns && (best == nil || best.used > 0) {
			h.startDialLocked()
		}
		if best != nil {
			best.used++
			h.mu.Unlock()
			return best, nil
		}
		ch := h.changed
		h.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("aborted before spawn: %w", context.Cause(ctx))
		case <-timer:
			return nil, h.deadlineError()
		case <-h.ctx.Done():
			return nil, ErrClosed
		}
	}
}

// errDeadline: the command's deadline passed before a channel was free.
var errDeadline = errors.New("ssh: the deadline passed before a channel to the host was free")

// deadlineError is why a command's deadline passed before it had a channel: every
// channel was busy (errDeadline), or no connection was up yet (a ConnectTimeoutError).
func (h *Host) deadlineError() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.conns) > 0 {
		return errDeadline
	}
	return &ConnectTimeoutError{Address: h.set.address, Handshake: h.dialing && h.handshaking}
}

// release returns a command channel of c.
func (h *Host) release(c *conn) {
	h.mu.Lock()
	c.used--
	h.notifyLocked()
	h.mu.Unlock()
}

// refused handles a session channel the server refused: it allows fewer sessions per
// connection than OpenSSH's default, or has not yet freed a session that just ended.
// c's budget drops to the channels it has open (at least 1); it grows back by one
// every refusalMemory without refusals. Refusals while no other command channel is
// open are retried for a while (the server may still be freeing sessions), then the
// call fails: the server takes no command beside the control channel.
func (h *Host) refused(c *conn) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	c.used--
	c.limit = max(c.used, 1)
	c.refusedAt = time.Now()
	if c.used > 0 {
		c.idleRefusals = 0
	} else if c.idleRefusals++; c.idleRefusals > maxIdleRefusals {
		c.idleRefusals = 0
		h.notifyLocked()
		return errors.New("the server refused a session channel (its MaxSessions must be at least 2)")
	}
	h.notifyLocked()
	return nil
}

// maxIdleRefusals bounds the retries of a channel refused while the connection had no
// other command channel open (refusalPause apart: about 2 s).
const (
	maxIdleRefusals = 40
	refusalPause    = 50 * time.Millisecond
)

// maxRemnants bounds the remembered remnants of finished commands (the oldest go).
const maxRemnants = 1024

// refusalMemory is how long a lowered channel budget lasts before it grows by one.
const refusalMemory = 10 * time.Second

// lost handles a connection that broke: its running commands end with a LostError and
// their remote process groups are remembered, to be killed once a connection is up.
func (h *Host) lost(c *conn, cause error) {
	lerr := &LostError{Address: h.set.address, Cause: cause}
	h.mu.Lock()
	if c.lost != nil {
		h.mu.Unlock()
		return
	}
	c.lost = lerr
	close(c.dead)
	for i, x := range h.conns {
		if x == c {
			h.conns = append(h.conns[:i], h.conns[i+1:]...)
			break
		}
	}
	for p := range c.procs {
		if o, ok := p.orphaned(lerr); ok {
			h.orphans = append(h.orphans, o)
		}
	}
	if len(h.conns) == 0 && !h.closed {
		h.cause = lerr
		h.reconnectLocked()
	}
	h.flushOrphansLocked()
	h.notifyLocked()
	closed := h.closed
	h.mu.Unlock()
	if !closed {
		h.log.Warn("ssh: connection lost", "address", h.set.address, "cause", cause)
	}
}

// flushOrphansLocked hands the remembered orphans to a live connection to kill.
func (h *Host) flushOrphansLocked() {
	if len(h.orphans) == 0 || len(h.conns) == 0 || h.closed {
		return
	}
	orphans := h.orphans
	h.orphans = nil
	h.wg.Add(1)
	go h.killOrphans(h.conns[0], orphans)
}

// kill orders the group killed on c: by its pid, or by its tag (see group).
func (o group) kill(h *Host, c *conn) (string, error) {
	id := h.nextID()
	if o.pid == 0 {
		return c.killTagged(id, commandVar, o.tag, o.graceMs)
	}
	return c.kill(id, o.pid, o.birth, o.graceMs)
}

// killOrphans kills the process groups of commands whose connection broke.
func (h *Host) killOrphans(c *conn, orphans []group) {
	defer h.wg.Done()
	var wg sync.WaitGroup
	var failed []group
	var mu sync.Mutex
	for _, o := range orphans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outcome, err := o.kill(h, c)
			if err != nil {
				mu.Lock()
				failed = append(failed, o)
				mu.Unlock()
				return
			}
			h.log.Info("ssh: killed a command left running by a lost connection", "pid", o.pid, "outcome", outcome)
		}()
	}
	wg.Wait()
	h.mu.Lock()
	if len(failed) > 0 {
		h.orphans = append(h.orphans, failed...)
		if len(h.conns) == 0 {
			h.reconnectLocked()
		} else {
			h.flushOrphansLocked()
		}
	}
	h.notifyLocked()
	h.mu.Unlock()
}
