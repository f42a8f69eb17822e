package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/dsh-dev/dsh/proc"
)

// Service is the name the Host is provided under.
const Service = "ssh"

// ErrClosed is returned by a Host that was closed (its row was disposed).
var ErrClosed = errors.New("ssh: service closed")

// channelsPerConnection is how many session channels one connection carries: OpenSSH's
// default MaxSessions (10). One is the connection's control channel; a server that
// allows fewer is detected when it refuses a channel.
const channelsPerConnection = 10

// dialTimeout bounds one connection attempt: TCP connect, key exchange, login.
const dialTimeout = 15 * time.Second

// Backoff of the background reconnection after a connection was lost or a dial failed.
const (
	backoffMin = 250 * time.Millisecond
	backoffMax = 30 * time.Second
)

// HostKeyError is the activation (or reconnection) failure for a host key that the
// known_hosts file does not list, or lists with another key.
type HostKeyError struct {
	Address        string
	KnownHostsFile string
}

// Error is "ssh: host key for <address> is not trusted by <knownHostsFile>".
func (e *HostKeyError) Error() string {
	return "ssh: host key for " + e.Address + " is not trusted by " + e.KnownHostsFile
}

// LoginError is a failure to log in (the server refused every key offered).
type LoginError struct {
	Address, User string
	Err           error
}

func (e *LoginError) Error() string {
	return "ssh: cannot log in to " + e.Address + " as " + e.User + ": " + e.Err.Error()
}

func (e *LoginError) Unwrap() error { return e.Err }

// LostError ends the commands of a connection that broke.
type LostError struct {
	Address string
	Cause   error
}

// Error is "ssh: connection to <address> lost: <cause>".
func (e *LostError) Error() string {
	return "ssh: connection to " + e.Address + " lost: " + e.Cause.Error()
}

func (e *LostError) Unwrap() error { return e.Cause }

// Options configure a Host beyond its Config.
type Options struct {
	// Logger receives warnings (default slog.Default()).
	Logger *slog.Logger
	// OnState, when set, is called with a one-line description of the connection state
	// each time it changes (the row's status detail). It must not call back into the
	// Host.
	OnState func(detail string)
}

// Host is the `ssh` service: up to maxConnections connections to one remote host, and
// every command running there. It owns the remote executions the way the subprocess
// Supervisor owns local ones: executors start commands through it and may go away while
// the commands run; closing the Host kills them.
type Host struct {
	set     settings
	log     *slog.Logger
	onState func(string)
	client  *xssh.ClientConfig
	spool   *proc.Spool

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu           sync.Mutex
	closed       bool
	conns        []*conn
	dialing      bool
	dialsStarted uint64
	lastDial     struct {
		seq uint64
		err error
	}
	cause        error // why no connection is up: the lost connection, or the first failed dial
	failures     int   // failed dials since the last success
	reconnecting bool
	changed      chan struct{} // closed and replaced on every change waiters care about
	live         map[*Process]struct{}
	orphans      []group
	remnants     []group // groups left running by finished commands (see Close)
	home         string
	seq          uint64
	detail       string
}

// group is a remote process group to kill later: a command's whose connection broke
// while it ran (killed as soon as a connection is up again), or what a finished command
// left running (killed when the Host closes).
type group struct {
	pid     int
	birth   string
	graceMs int64
}

// New checks cfg, reads the key and the known_hosts file, and returns a Host that has
// not connected yet (see Connect).
func New(cfg *Config, opts Options) (*Host, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	set, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	keyData, err := os.ReadFile(set.identityFile)
	if err != nil {
		return nil, fmt.Errorf("ssh: identityFile: %w", err)
	}
	signer, err := xssh.ParsePrivateKey(keyData)
	if err != nil {
		var pe *xssh.PassphraseMissingError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("ssh: identityFile: %s is encrypted with a passphrase; dsh needs an unencrypted key", set.identityFile)
		}
		return nil, fmt.Errorf("ssh: identityFile: %s: %w", set.identityFile, err)
	}
	known, err := knownhosts.New(set.knownHostsFile)
	if err != nil {
		return nil, fmt.Errorf("ssh: knownHostsFile: %w", err)
	}
	h := &Host{
		set:     set,
		log:     opts.Logger,
		onState: opts.OnState,
		changed: make(chan struct{}),
		live:    map[*Process]struct{}{},
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.spool = proc.NewSpool(proc.SpoolOptions{Root: cfg.SpillRoot, BudgetBytes: cfg.SpillBudgetBytes, Logger: h.log})
	h.client = &xssh.ClientConfig{
		User:              set.user,
		Auth:              []xssh.AuthMethod{xssh.PublicKeys(signer)},
		HostKeyCallback:   h.checkHostKey(known),
		HostKeyAlgorithms: knownAlgorithms(known, set.address),
	}
	h.mu.Lock()
	h.setStateLocked()
	h.mu.Unlock()
	return h, nil
}

// checkHostKey accepts exactly the keys known_hosts lists for the host.
func (h *Host) checkHostKey(known xssh.HostKeyCallback) xssh.HostKeyCallback {
	return func(hostname string, remote net.Addr, key xssh.PublicKey) error {
		err := known(hostname, remote, key)
		if err == nil {
			return nil
		}
		var ke *knownhosts.KeyError
		var re *knownhosts.RevokedError
		if errors.As(err, &ke) || errors.As(err, &re) {
			return &HostKeyError{Address: h.set.address, KnownHostsFile: h.set.knownHostsFile}
		}
		return err
	}
}

// knownAlgorithms lists the host key algorithms of the keys known_hosts has for
// address, so that the server presents one of those (a server with an RSA and an
// Ed25519 key, known by its Ed25519 key only, must not be asked for RSA). Nil lets the
// library choose (the host is unknown and will be refused anyway).
func knownAlgorithms(known xssh.HostKeyCallback, address string) []string {
	probe := probeKey{}
	err := known(address, &net.TCPAddr{}, probe)
	var ke *knownhosts.KeyError
	if !errors.As(err, &ke) || len(ke.Want) == 0 {
		return nil
	}
	var algos []string
	seen := map[string]bool{}
	add := func(a string) {
		if !seen[a] {
			seen[a] = true
			algos = append(algos, a)
		}
	}
	for _, k := range ke.Want {
		switch t := k.Key.Type(); t {
		case xssh.KeyAlgoRSA:
			add(xssh.KeyAlgoRSASHA512)
			add(xssh.KeyAlgoRSASHA256)
			add(xssh.KeyAlgoRSA)
		default:
			add(t)
		}
	}
	return algos
}

// probeKey is a key no known_hosts line matches: checking it lists the host's keys.
type probeKey struct{}

func (probeKey) Type() string                         { return "dsh-probe" }
func (probeKey) Marshal() []byte                      { return []byte("dsh-probe") }
func (probeKey) Verify([]byte, *xssh.Signature) error { return errors.New("probe key") }

// EndSession deletes the spill files of a harness session's commands (Spec.Owner),
// now for finished ones and when they finish for running ones.
func (h *Host) EndSession(id string) { h.spool.EndOwner(id) }

// Spool is the capture of the remote commands' output (spill files are kept locally).
func (h *Host) Spool() *proc.Spool { return h.spool }

// Address is the configured host:port.
func (h *Host) Address() string { return h.set.address }

// User is the remote login name.
func (h *Host) User() string { return h.set.user }

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
	h.dialing = false
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

// acquire reserves a command channel on the least loaded connection, dialing a new
// connection when every connection is busy and fewer than maxConnections exist. It
// waits (bounded by ctx and deadline) when every connection is full; it fails when no
// connection is up and a dial started after the call arrived failed.
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
			return nil, errDeadline
		case <-h.ctx.Done():
			return nil, ErrClosed
		}
	}
}

// errDeadline: the command's deadline passed before a channel was free.
var errDeadline = errors.New("ssh: the deadline passed before a channel to the host was free")

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
			outcome, err := c.kill(h.nextID(), o.pid, o.birth, o.graceMs)
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

func (h *Host) nextID() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	return h.seq
}

// Home returns the remote user's home directory ($HOME of a login), learned once.
func (h *Host) Home(ctx context.Context) (string, error) {
	h.mu.Lock()
	home := h.home
	h.mu.Unlock()
	if home != "" {
		return home, nil
	}
	// The login shell's start-up files may print before the command does: the home is
	// what follows the marker.
	marker := newMarker()
	out, err := h.output(ctx, "printf '%s%s' "+marker+` "$HOME"`)
	if err != nil {
		return "", err
	}
	if i := strings.LastIndex(out, marker); i >= 0 {
		out = out[i+len(marker):]
	}
	if out == "" || out[0] != '/' {
		return "", fmt.Errorf("ssh: the remote home directory is not an absolute path: %q", out)
	}
	h.mu.Lock()
	h.home = out
	h.mu.Unlock()
	return out, nil
}

// output runs a short command through the login shell and returns its stdout.
func (h *Host) output(ctx context.Context, command string) (string, error) {
	c, err := h.acquire(ctx, time.Time{})
	if err != nil {
		return "", err
	}
	defer h.release(c)
	ch, reqs, err := c.client.OpenChannel("session", nil)
	if err != nil {
		return "", c.failure(err)
	}
	defer ch.Close()
	status := make(chan int, 1)
	go func() {
		code := -1
		for r := range reqs {
			if c, ok := exitStatus(r); ok {
				code = c
			}
			if r.WantReply {
				_ = r.Reply(false, nil)
			}
		}
		status <- code
	}()
	go func() { _, _ = io.Copy(io.Discard, ch.Stderr()) }()
	ok, err := ch.SendRequest("exec", true, xssh.Marshal(struct{ Command string }{command}))
	if err != nil || !ok {
		return "", c.failure(errExecRefused(err))
	}
	_ = ch.CloseWrite()
	stop := context.AfterFunc(ctx, func() { ch.Close() })
	defer stop()
	data, err := io.ReadAll(io.LimitReader(ch, 1<<20))
	if err != nil {
		return "", c.failure(err)
	}
	if code := <-status; code != 0 {
		if ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		if lerr := c.lostErr(); lerr != nil {
			return "", lerr
		}
		return "", fmt.Errorf("ssh: %s: %q exited with status %d", h.set.address, command, code)
	}
	return string(data), nil
}

func errExecRefused(err error) error {
	if err != nil {
		return err
	}
	return errors.New("the server refused to run a command (exec request denied)")
}

// Close disposes the Host: no new commands; every running command is killed (SIGTERM
// to its remote process group, SIGKILL after its grace period) and awaited, and settles
// as killed; what finished commands left running while holding their output open (a
// `cmd &`) is ended the same way; then the connections close. Finished commands keep
// their results. Close is idempotent.
func (h *Host) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		h.wg.Wait()
		return
	}
	h.closed = true
	h.cancel()
	live := make([]*Process, 0, len(h.live))
	for p := range h.live {
		live = append(live, p)
	}
	h.notifyLocked()
	h.mu.Unlock()
	for _, p := range live {
		p.tear.Kill(proc.ReasonDispose, ErrClosed, true)
	}
	h.mu.Lock()
	remnants := h.remnants
	h.remnants = nil
	var via *conn
	if len(h.conns) > 0 {
		via = h.conns[0]
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	if via != nil {
		for _, o := range remnants {
			wg.Go(func() { _, _ = via.kill(h.nextID(), o.pid, o.birth, o.graceMs) })
		}
	}
	for _, p := range live {
		<-p.Done()
	}
	wg.Wait()
	h.mu.Lock()
	conns := h.conns
	h.conns = nil
	orphans := h.orphans
	h.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	h.wg.Wait()
	h.spool.Close()
	if len(orphans) > 0 {
		pids := make([]int, len(orphans))
		for i, o := range orphans {
			pids[i] = o.pid
		}
		h.log.Warn("ssh: closing with remote commands of lost connections still unkilled", "address", h.set.address, "pids", pids)
	}
}
