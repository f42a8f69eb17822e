package ssh

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	xssh "golang.org/x/crypto/ssh"

	"github.com/dsh-dev/dsh/proc"
)

// Spec describes one remote command.
type Spec struct {
	// Command runs as `bash -c <Command>` on the remote host.
	Command string
	// Dir is the absolute remote working directory.
	Dir string
	// Env holds ordinary variables, exported in the remote command over the remote
	// login environment and the fixed overrides (NO_COLOR=1 TERM=dumb PAGER=cat
	// GIT_PAGER=cat GIT_TERMINAL_PROMPT=0). Names must be shell identifiers.
	Env map[string]string
	// DshEnv is the managed DSH_* snapshot, exported last; every DSH_* variable of the
	// remote login environment is removed first.
	DshEnv map[string]string
	// Stdin, when non-nil, is written to the command once and closed; nil means an
	// empty stdin.
	Stdin []byte
	// Stdout and Stderr bound the capture of each stream (kept locally).
	Stdout, Stderr proc.Capture
	// GraceMs is the time between SIGTERM and SIGKILL to the remote process group, and
	// how long output may drain after the command exited (0 < GraceMs ≤ proc.MaxGraceMs).
	GraceMs int64
	// Deadline, when non-zero, kills the command when it passes (Exit.Reason
	// proc.ReasonTimeout).
	Deadline time.Time
	// Owner is the session the command belongs to ("" for none).
	Owner string
	// Terminal, when set, runs the command under a remote pseudo-terminal of this size
	// (see terminal.go): Stdin must be nil, the output is Stdout, the input goes
	// through Process.WriteInput.
	Terminal *proc.Terminal
}

// Process is one remote command and its captured output. All methods are safe for
// concurrent use.
type Process struct {
	h       *Host
	c       *conn
	ch      xssh.Channel
	marker  []byte
	tag     string // commandVar's value in its environment (random, like the marker)
	dir     string
	owner   string // Spec.Owner
	graceMs int64
	stdin   []byte
	tty     *terminal // the command's terminal (Spec.Terminal), or nil

	stdout, stderr *proc.Stream

	// tear is the command's life: kill → escalate → drain → settle (see
	// proc.Teardown). Its kill is an order to the connection's control shell, which
	// escalates on the remote host by itself (remoteTree).
	tear proc.Teardown

	startOnce sync.Once
	started   chan struct{}  // the start line arrived, or stdout ended without it
	abandoned chan struct{}  // closed when the command is given up before it started
	io        sync.WaitGroup // the readers and the stdin writer

	mu        sync.Mutex
	start     startState
	pid       int    // the remote leader, once started: also its group's and session's id
	birth     string // the leader's start time, once started ("" without /proc)
	startErr  error  // why the command did not start, when known
	preStderr []byte // what the login shell wrote on stderr before the script ran
	errLast   byte   // the last byte of the command's stderr
	// killDone is made by the kill (remoteTree.Terminate) and closed once the remote
	// kill order finished.
	killDone chan struct{}
	lost     error // the LostError of a connection that broke while the command ran
}

// startState is how far a command's start has come. onStart moves it, once:
//
//	startPending --start line-->                   startDone   (pid and birth known)
//	startPending --a failure, or EOF before it-->  startFailed (startErr says why, when known)
//
// Its teardown (proc.Teardown) tracks the rest of the command's life.
type startState int

const (
	startPending startState = iota
	startDone
	startFailed
)

// Start runs spec on the host and returns once the remote command has started (its pid
// is known). Invalid input and an already-cancelled ctx fail before anything runs
// (nothing is sent); a closed Host fails with ErrClosed. A start that belongs to the
// call failing is a *proc.SpawnError: a working directory the remote cannot
// enter ("spawn failed: chdir <dir>: ENOENT …"), a remote without bash, or no
// connection ("spawn failed: connect <address>: <cause>"). When the deadline passes
// while every channel is busy, the returned process has settled, timed out, without
// running; when it passes while the connection it waits for is still being made, the
// process has settled without running, its Exit.Err a ConnectTimeoutError. Cancelling ctx later kills the command (proc.ReasonAbort); pass a context
// without cancellation to detach it.
func (h *Host) Start(ctx context.Context, spec Spec) (*Process, error) {
	if err := checkSpec(spec); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("aborted before spawn: %w", context.Cause(ctx))
	}
	ss, err := h.openSession(ctx, spec.Deadline)
	switch {
	case errors.Is(err, errDeadline):
		return h.expired(spec), nil
	case errors.As(err, new(*ConnectTimeoutError)):
		return h.neverConnected(spec, err), nil
	case err != nil:
		return nil, err
	}
	marker := newMarker()
	p, err := h.register(ss, spec, marker)
	if err != nil {
		return nil, err
	}
	if spec.Terminal != nil {
		p.tty = &terminal{}
		if err := p.requestTerminal(*spec.Terminal); err != nil {
			serr := h.cannotStart(p.c.failure(err))
			p.onStart(nil, serr) // closes the channel; the process settles
			return nil, serr
		}
	}
	if err := p.exec(ctx, spec.Deadline, execPayload(marker, ss.ctl.registry, h.ownerTag(spec.Owner), p.tag, spec)); err != nil {
		return nil, err
	}
	return p.awaitStartLine(ctx)
}

// session is a command channel open on a connection whose control channel is open.
type session struct {
	c    *conn
	ctl  *control
	ch   xssh.Channel
	reqs <-chan *xssh.Request
}

// openSession reserves a command channel on a connection and opens it. It waits for a
// free channel, bounded by ctx and deadline (errDeadline), and tries again when the
// server refuses the channel (it allows fewer sessions than OpenSSH's default, or has
// not yet freed one that just ended).
func (h *Host) openSession(ctx context.Context, deadline time.Time) (session, error) {
	for {
		c, err := h.acquire(ctx, deadline)
		switch {
		case errors.Is(err, errDeadline), errors.As(err, new(*ConnectTimeoutError)),
			err != nil && (errors.Is(err, ErrClosed) || ctx.Err() != nil):
			return session{}, err
		case err != nil:
			return session{}, h.cannotStart(err)
		}
		// The control channel is open (it opens right after the connection): the command
		// registers itself there before it starts.
		ctl, err := c.control()
		if err != nil {
			h.release(c)
			if errors.As(err, new(*proc.SpawnError)) {
				return session{}, err // no bash on the host
			}
			return session{}, h.cannotStart(err)
		}
		ch, reqs, err := c.client.OpenChannel("session", nil)
		if err == nil {
			return session{c: c, ctl: ctl, ch: ch, reqs: reqs}, nil
		}
		if !errors.As(err, new(*xssh.OpenChannelError)) {
			h.release(c)
			return session{}, h.cannotStart(c.failure(err))
		}
		if rerr := h.refused(c); rerr != nil {
			return session{}, h.cannotStart(rerr)
		}
		select {
		case <-time.After(refusalPause):
		case <-ctx.Done():
		}
	}
}

// execPayload is the exec request of a command: the script and its arguments (see
// execScript), with its owner's tag (ownerTag; "" for none) exported as ownerVar and
// its own (cmdTag) as commandVar.
func execPayload(marker, registry, tag, cmdTag string, spec Spec) []byte {
	args := make([]string, 0, 7+len(spec.Env)+len(spec.DshEnv))
	args = append(args, marker, registry, strconv.FormatInt(spec.GraceMs, 10), spec.Dir, spec.Command)
	args = appendEnv(args, spec.Env)
	args = appendEnv(args, spec.DshEnv)
	if tag != "" {
		args = append(args, ownerVar+"="+tag)
	}
	args = append(args, commandVar+"="+cmdTag)
	return xssh.Marshal(struct{ Command string }{commandLine(execScript, args...)})
}

// register makes the command's Process on its channel and lists it with the Host and
// the connection before anything runs (a Close from now on kills it); then its readers
// and the server of its channel's requests start.
func (h *Host) register(ss session, spec Spec, marker string) (*Process, error) {
	p := &Process{
		h: h, c: ss.c, ch: ss.ch, marker: []byte(marker), tag: newTag(), dir: spec.Dir, owner: spec.Owner, graceMs: spec.GraceMs, stdin: spec.Stdin,
		stdout:    h.spool.NewStream(spec.Owner, spec.Stdout),
		stderr:    h.spool.NewStream(spec.Owner, spec.Stderr),
		started:   make(chan struct{}),
		abandoned: make(chan struct{}),
	}
	p.tear.Init(time.Duration(spec.GraceMs)*time.Millisecond, (*remoteTree)(p))
	h.mu.Lock()
	ss.c.idleRefusals = 0
	if h.closed || ss.c.lost != nil {
		err := error(ErrClosed)
		if ss.c.lost != nil {
			err = h.cannotStart(ss.c.lost)
		}
		h.mu.Unlock()
		p.stdout.Close()
		p.stderr.Close()
		ss.ch.Close()
		go xssh.DiscardRequests(ss.reqs)
		h.release(ss.c)
		return nil, err
	}
	h.live[p] = struct{}{}
	ss.c.procs[p] = struct{}{}
	h.ranLocked(spec.Owner)
	h.notifyLocked()
	h.mu.Unlock()
	p.io.Add(2)
	if p.stdin != nil {
		p.io.Add(1) // the writer's, counted before run may wait
	}
	go p.readStdout()
	go p.readStderr()
	go p.run(ss.reqs)
	return p, nil
}

// exec sends the exec request, then the stdin (or its end), and arms the deadline and
// the context. A refused request fails the start; the process settles.
func (p *Process) exec(ctx context.Context, deadline time.Time, payload []byte) error {
	ok, err := p.ch.SendRequest("exec", true, payload)
	if err != nil || !ok {
		if p.stdin != nil {
			p.io.Done()
		}
		serr := p.h.cannotStart(p.c.failure(errExecRefused(err)))
		p.onStart(nil, serr) // closes the channel; the process settles
		return serr
	}
	switch {
	case p.stdin != nil:
		go p.writeStdin()
	case p.tty == nil:
		_ = p.ch.CloseWrite()
	}
	p.tear.Arm(ctx, deadline, nil)
	return nil
}

// awaitStartLine waits for the start line. It returns the process once it started — or
// when ctx ends first (it is killed as soon as its pid is known), or when it was
// killed before it started (it settles so) — and else why it did not start.
func (p *Process) awaitStartLine(ctx context.Context) (*Process, error) {
	select {
	case <-p.started:
	case <-ctx.Done():
		return p, nil
	}
	p.mu.Lock()
	start, serr := p.start, p.startErr
	p.mu.Unlock()
	switch {
	case errors.Is(serr, errNotStarted):
		return p, nil
	case errors.As(serr, new(*LostError)):
		// Lost after the exec request went out: the command may be running, and ends
		// with the loss as a running one does (its process group, if it registered, is
		// killed once a connection is up again).
		select {
		case <-p.tear.Done():
		case <-ctx.Done():
		}
		return p, nil
	case serr != nil:
		return nil, serr
	case start != startDone:
		<-p.tear.Done()
		if ex, _ := p.tear.Exit(); errors.As(ex.Err, new(*LostError)) {
			return p, nil // lost before its start line: ended with the loss, as above
		}
		return nil, p.spawnFailure()
	}
	return p, nil
}

// cannotStart is a failure to reach the host for a command, as the spawn failure it is
// for the caller: "spawn failed: connect <address>: <cause>".
func (h *Host) cannotStart(err error) error {
	return &proc.SpawnError{Op: "connect", Path: h.set.address, Err: err}
}

func checkSpec(spec Spec) error {
	if spec.Command == "" || strings.IndexByte(spec.Command, 0) >= 0 {
		return errors.New("invalid command: expected a non-empty string without NUL bytes")
	}
	if !strings.HasPrefix(spec.Dir, "/") || strings.IndexByte(spec.Dir, 0) >= 0 {
		return fmt.Errorf("invalid dir: expected an absolute remote path, got %q", spec.Dir)
	}
	if err := proc.CheckLimits(spec.GraceMs, spec.Stdout, spec.Stderr); err != nil {
		return err
	}
	if t := spec.Terminal; t != nil {
		if spec.Stdin != nil {
			return errors.New("invalid spec: stdin cannot be given with a terminal")
		}
		if err := t.Check(); err != nil {
			return fmt.Errorf("invalid terminal: %w", err)
		}
	}
	for k, v := range spec.Env {
		if !validName(k) {
			return fmt.Errorf("invalid env: %q is not a name a remote shell can export", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("invalid env: variable %q contains a NUL byte", k)
		}
	}
	for k, v := range spec.DshEnv {
		if !strings.HasPrefix(k, "DSH_") || !validName(k) {
			return fmt.Errorf("invalid dshEnv: key %q is not a DSH_* name", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("invalid dshEnv: variable %q contains a NUL byte", k)
		}
	}
	return nil
}

// appendEnv adds NAME=VALUE words in name order.
func appendEnv(args []string, env map[string]string) []string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, k+"="+env[k])
	}
	return args
}

// expired is the handle of a command whose deadline passed before a channel was free:
// it never ran, and reports a timeout without a signal.
func (h *Host) expired(spec Spec) *Process {
	p := h.unstarted(spec)
	p.tear.Abandon(proc.ReasonTimeout, nil)
	return p
}

// neverConnected is the handle of a command whose deadline passed while the connection
// it waited for was still being made: it never ran, and ends with err (a
// ConnectTimeoutError), an infrastructure failure rather than a timeout of the command.
func (h *Host) neverConnected(spec Spec, err error) *Process {
	p := h.unstarted(spec)
	p.tear.Settle(err)
	return p
}

// unstarted is the handle of a command that will never run, its output closed empty,
// for the caller to settle.
func (h *Host) unstarted(spec Spec) *Process {
	p := &Process{h: h, stdout: h.spool.NewStream(spec.Owner, spec.Stdout), stderr: h.spool.NewStream(spec.Owner, spec.Stderr),
		started: make(chan struct{})}
	p.tear.Init(time.Duration(spec.GraceMs)*time.Millisecond, (*remoteTree)(p))
	p.stdout.Close()
	p.stderr.Close()
	close(p.started)
	return p
}

// Pid is the remote command's process id, which is also the id of its process group
// and session on the remote host (0 if it never started).
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

// Stdout is the captured standard output.
func (p *Process) Stdout() *proc.Stream { return p.stdout }

// Stderr is the captured standard error.
func (p *Process) Stderr() *proc.Stream { return p.stderr }

// Done is closed when the command has settled: it exited and its output reached EOF
// or the drain bound (graceMs after the exit) passed, and, if it was being killed, the
// remote kill sequence finished (the group is gone, or got SIGKILL after graceMs); or
// its connection broke.
func (p *Process) Done() <-chan struct{} { return p.tear.Done() }

// Exit returns how the command ended, and false while it has not settled.
func (p *Process) Exit() (proc.Exit, bool) { return p.tear.Exit() }

// Kill ends the command's remote process group: SIGTERM now, SIGKILL after the grace
// period to whatever is left — even when the command itself already exited. It returns
// false once the command has settled; calling it again is harmless.
func (p *Process) Kill() bool { return p.tear.Kill(proc.ReasonKill, nil, true) }
