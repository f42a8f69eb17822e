package ssh

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/dsh-dev/dsh/proc"
)

// ErrClosed is returned by a Host that was closed (its row was disposed).
var ErrClosed = errors.New("ssh: service closed")

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

// ConnectTimeoutError ends a command whose deadline passed while it waited for a
// connection that was still being made: the command never started.
type ConnectTimeoutError struct {
	Address string
	// Handshake: the TCP connection was made, the SSH handshake (version exchange, key
	// exchange, login) had not finished.
	Handshake bool
}

// Error is "ssh: connection to <address> timed out during the handshake; the command
// did not start" ("during the TCP connect" before the handshake began).
func (e *ConnectTimeoutError) Error() string {
	stage := "the TCP connect"
	if e.Handshake {
		stage = "the handshake"
	}
	return "ssh: connection to " + e.Address + " timed out during " + stage + "; the command did not start"
}

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
	handshaking  bool // the dial made its TCP connection and is in the SSH handshake
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
	// tagKey makes the owners' tags (leftover.go); owners are those that ran commands
	// and have not ended.
	tagKey [16]byte
	owners map[string]bool
}

// group is a remote process group to kill later: a command's whose connection broke
// while it ran (killed as soon as a connection is up again), or what a finished command
// left running (killed when the Host closes).
type group struct {
	pid     int
	birth   string
	graceMs int64
	// tag, for a command whose start line never came (pid 0): the processes whose
	// environment holds it are its (commandVar).
	tag string
}

// New checks cfg, reads the key and the known_hosts file, and returns a Host that has
// not connected yet (see Connect).
func New(cfg *Config, opts Options) (*Host, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
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
		owners:  map[string]bool{},
	}
	if _, err := rand.Read(h.tagKey[:]); err != nil {
		return nil, fmt.Errorf("ssh: %w", err)
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

// EndSession ends what a harness session's finished commands (Spec.Owner) left running
// in their remote process groups (leftover.go), then deletes the spill files of its
// commands, now for finished ones and when they finish for running ones.
func (h *Host) EndSession(id string) {
	h.endLeftovers(id)
	h.spool.EndOwner(id)
}

// Spool is the capture of the remote commands' output (spill files are kept locally).
func (h *Host) Spool() *proc.Spool { return h.spool }

// Address is the configured host:port.
func (h *Host) Address() string { return h.set.address }

// User is the remote login name.
func (h *Host) User() string { return h.set.user }

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
