package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
}

// Process is one remote command and its captured output. All methods are safe for
// concurrent use.
type Process struct {
	h       *Host
	c       *conn
	ch      xssh.Channel
	marker  []byte
	dir     string
	graceMs int64
	stdin   []byte

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
// running. Cancelling ctx later kills the command (proc.ReasonAbort); pass a context
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
	case err != nil:
		return nil, err
	}
	marker := newMarker()
	p, err := h.register(ss, spec, marker)
	if err != nil {
		return nil, err
	}
	if err := p.exec(ctx, spec.Deadline, execPayload(marker, ss.ctl.registry, spec)); err != nil {
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
		case errors.Is(err, errDeadline), err != nil && (errors.Is(err, ErrClosed) || ctx.Err() != nil):
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
// execScript).
func execPayload(marker, registry string, spec Spec) []byte {
	args := make([]string, 0, 5+len(spec.Env)+len(spec.DshEnv))
	args = append(args, marker, registry, strconv.FormatInt(spec.GraceMs, 10), spec.Dir, spec.Command)
	args = appendEnv(args, spec.Env)
	args = appendEnv(args, spec.DshEnv)
	return xssh.Marshal(struct{ Command string }{commandLine(execScript, args...)})
}

// register makes the command's Process on its channel and lists it with the Host and
// the connection before anything runs (a Close from now on kills it); then its readers
// and the server of its channel's requests start.
func (h *Host) register(ss session, spec Spec, marker string) (*Process, error) {
	p := &Process{
		h: h, c: ss.c, ch: ss.ch, marker: []byte(marker), dir: spec.Dir, graceMs: spec.GraceMs, stdin: spec.Stdin,
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
	if p.stdin != nil {
		go p.writeStdin()
	} else {
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
	case serr != nil:
		return nil, serr
	case start != startDone:
		<-p.tear.Done()
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
	p := &Process{h: h, stdout: h.spool.NewStream(spec.Owner, spec.Stdout), stderr: h.spool.NewStream(spec.Owner, spec.Stderr),
		started: make(chan struct{})}
	p.tear.Init(time.Duration(spec.GraceMs)*time.Millisecond, (*remoteTree)(p))
	p.stdout.Close()
	p.stderr.Close()
	close(p.started)
	p.tear.Abandon(proc.ReasonTimeout, nil)
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

// remoteTree is the Process as its teardown reaches it (a proc.Tree): through kill
// orders on its connection's control channel, and by closing its channel.
type remoteTree Process

// Terminate orders the remote kill — SIGTERM to the group, SIGKILL after graceMs to
// what is left — once the pid is known (onStart sends the order when the start line
// arrives); a command that did not start has nothing to kill.
func (t *remoteTree) Terminate() {
	p := (*Process)(t)
	p.mu.Lock()
	p.killDone = make(chan struct{})
	start := p.start
	p.mu.Unlock()
	switch start {
	case startDone:
		go p.sendKill()
	case startFailed:
		close(p.killDone)
	default:
		// The start line has not arrived yet: onStart sends the order when it does.
		go p.awaitStart()
	}
}

// Escalate does nothing: the kill order escalates on the remote host by itself.
func (t *remoteTree) Escalate() {}

// AwaitGone waits for the kill order to finish on the remote: the group is gone, or
// got SIGKILL after graceMs.
func (t *remoteTree) AwaitGone(time.Time, <-chan struct{}) bool {
	p := (*Process)(t)
	p.mu.Lock()
	killDone := p.killDone
	p.mu.Unlock()
	<-killDone
	return true
}

// Cut ends the drain: the channel is closed (a `cmd &` left behind may hold the
// output open).
func (t *remoteTree) Cut() { t.ch.Close() }

// errNotStarted: a command killed before its start line did not start in time.
var errNotStarted = errors.New("the command had not started")

// awaitStart gives a command being killed before its start line arrived the grace
// period to start (then onStart kills it); a command that has not started by then —
// a login shell stuck in its start-up files — is abandoned: its channel is closed and
// it settles without having run, so that no call outlives its deadline by more than
// the grace period.
func (p *Process) awaitStart() {
	t := time.NewTimer(time.Duration(p.graceMs) * time.Millisecond)
	defer t.Stop()
	select {
	case <-p.started:
	case <-t.C:
		if p.onStart(nil, fmt.Errorf("ssh: %s: %w %dms after it was killed", p.h.set.address, errNotStarted, p.graceMs)) {
			close(p.abandoned)
		}
	}
}

// sendKill orders the kill on the connection's control channel and waits for it to
// finish on the remote.
func (p *Process) sendKill() {
	defer close(p.killDone)
	_, err := p.c.kill(p.h.nextID(), p.pid, p.birth, p.graceMs)
	if err != nil && !errors.As(err, new(*LostError)) {
		p.h.log.Warn("ssh: cannot kill a remote command", "pid", p.pid, "err", err)
	}
}

// orphaned marks a command of a lost connection. It returns the remote group to kill
// once a connection is up, when the command had started and not exited.
func (p *Process) orphaned(lerr *LostError) (group, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tear.LeaderRuns() {
		return group{}, false
	}
	p.lost = lerr
	if p.start != startDone {
		return group{}, false
	}
	return group{pid: p.pid, birth: p.birth, graceMs: p.graceMs}, true
}

// readStdout finds the start line, then captures the command's stdout.
func (p *Process) readStdout() {
	defer p.io.Done()
	bp := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(bp)
	buf := *bp
	sc := startScanner{marker: p.marker}
	started := false
	for {
		n, err := p.ch.Read(buf)
		data := buf[:n]
		if !started && n > 0 {
			line, rest, found, serr := sc.feed(data)
			data = nil
			switch {
			case serr != nil:
				p.onStart(nil, fmt.Errorf("ssh: %s: %w", p.h.set.address, serr))
				started = true
			case found:
				st, perr := parseStart(line, p.dir)
				if perr != nil {
					perr = fmt.Errorf("ssh: %s: %w", p.h.set.address, perr)
				} else if st.failed != nil {
					perr = st.failed
				}
				p.onStart(&st, perr)
				started, data = true, rest
			}
		}
		if len(data) > 0 {
			_, _ = p.stdout.Write(data)
		}
		if err != nil {
			if !started {
				p.onStart(nil, nil)
			}
			return
		}
	}
}

// readBuffers hold the readers' buffers: a channel delivers at most 32 KiB at a time.
var readBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// startScanner finds the script's marker line at the start of a stream. What precedes
// the marker was written by the login shell (its tail is kept, for diagnostics); what
// follows it up to the newline is the line; the rest belongs to the command. Memory is
// bounded whatever the login shell writes.
type startScanner struct {
	marker  []byte
	pending []byte // bytes that may still hold (the start of) the marker
	junk    []byte // the tail of what preceded the marker
}

// Bounds of the scanner: the longest line after a marker, and the junk tail kept.
const (
	maxStartLine = 256
	maxJunk      = 4096
)

// feed scans p. found: the marker's line is complete; line is what follows the marker
// up to the newline, rest what follows the newline in the bytes fed so far (both valid
// until the next feed). An error means the marker's line is longer than any start line.
func (s *startScanner) feed(p []byte) (line, rest []byte, found bool, err error) {
	s.pending = append(s.pending, p...)
	i := bytes.Index(s.pending, s.marker)
	if i < 0 {
		// Keep what could be the beginning of a marker split across reads.
		if keep := len(s.marker) - 1; len(s.pending) > keep {
			s.addJunk(s.pending[:len(s.pending)-keep])
			s.pending = append(s.pending[:0], s.pending[len(s.pending)-keep:]...)
		}
		return nil, nil, false, nil
	}
	s.addJunk(s.pending[:i])
	s.pending = append(s.pending[:0], s.pending[i:]...)
	after := s.pending[len(s.marker):]
	nl := bytes.IndexByte(after, '\n')
	switch {
	case nl >= 0:
		return after[:nl], after[nl+1:], true, nil
	case len(after) > maxStartLine:
		return nil, nil, false, errHeader
	}
	return nil, nil, false, nil
}

func (s *startScanner) addJunk(b []byte) {
	if len(b) > 0 {
		s.junk = keepTail(append(s.junk, b...), maxJunk)
	}
}

// keepTail drops all but the last n bytes of b.
func keepTail(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	return append(b[:0], b[len(b)-n:]...)
}

// onStart records the start line (st nil: stdout ended without one) or why the command
// did not start, and sends a kill order that was waiting for the pid. Only the first
// call counts; it reports whether this one was it.
func (p *Process) onStart(st *startLine, err error) (first bool) {
	p.startOnce.Do(func() {
		first = true
		p.mu.Lock()
		switch {
		case err != nil:
			p.start, p.startErr = startFailed, err
		case st != nil:
			p.start, p.pid, p.birth = startDone, st.pid, st.birth
		default:
			p.start = startFailed
		}
		killing := p.killDone != nil
		send := killing && p.start == startDone
		failed := killing && p.start == startFailed
		p.mu.Unlock()
		close(p.started)
		switch {
		case send:
			go p.sendKill()
		case failed:
			close(p.killDone)
		}
		if err != nil {
			p.ch.Close() // the command is not running: nothing more to read
		}
	})
	return first
}

// readStderr skips what the login shell wrote before the script's marker line (keeping
// its tail, to explain a failed start), then captures the command's stderr.
func (p *Process) readStderr() {
	defer p.io.Done()
	r := p.ch.Stderr()
	bp := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(bp)
	buf := *bp
	sc := startScanner{marker: p.marker}
	started := false
	for {
		n, err := r.Read(buf)
		data := buf[:n]
		if !started && n > 0 {
			_, rest, found, serr := sc.feed(data)
			data = nil
			if found || serr != nil {
				started, data = true, rest
				p.mu.Lock()
				p.preStderr = sc.junk
				p.mu.Unlock()
			}
		}
		if len(data) > 0 {
			_, _ = p.stderr.Write(data)
			p.mu.Lock()
			p.errLast = data[len(data)-1]
			p.mu.Unlock()
		}
		if err != nil {
			if !started {
				p.mu.Lock()
				p.preStderr = append(sc.junk, sc.pending...)
				p.mu.Unlock()
			}
			return
		}
	}
}

func (p *Process) writeStdin() {
	defer p.io.Done()
	if _, err := p.ch.Write(p.stdin); err == nil {
		_ = p.ch.CloseWrite()
	}
}

// run serves the channel's requests (exit-status, exit-signal) until the channel
// closes, then settles the process.
func (p *Process) run(reqs <-chan *xssh.Request) {
	for {
		var r *xssh.Request
		select {
		case r = <-reqs:
		case <-p.abandoned:
			// sshd keeps a channel open while its session's process lives, and this
			// one never started the command: settle now; the channel's requests are
			// still drained (an unserved channel would stall the connection).
			go xssh.DiscardRequests(reqs)
			p.settle()
			return
		}
		if r == nil {
			break
		}
		switch r.Type {
		case "exit-status":
			if code, ok := exitStatus(r); ok {
				p.tear.Exited(proc.Exited(code))
			}
		case "exit-signal":
			var m struct {
				Signal     string
				CoreDumped bool
				Error      string
				Lang       string
			}
			if xssh.Unmarshal(r.Payload, &m) == nil {
				p.tear.Exited(proc.Exit{Signal: signalName(m.Signal)})
			}
		}
		if r.WantReply {
			_ = r.Reply(false, nil)
		}
	}
	p.io.Wait() // stdout's reader has seen the start line, or EOF without one
	p.settle()
}

// exitStatus decodes an exit-status request.
func exitStatus(r *xssh.Request) (int, bool) {
	var m struct{ Status uint32 }
	if r.Type != "exit-status" || xssh.Unmarshal(r.Payload, &m) != nil {
		return 0, false
	}
	return int(m.Status), true
}

// signalName turns an SSH signal name ("TERM") into the local form ("SIGTERM").
func signalName(s string) string {
	if s == "" || strings.Contains(s, "@") {
		return "SIG" + strings.ToUpper(strings.TrimSuffix(s, "@openssh.com"))
	}
	return "SIG" + s
}

// settle fixes the outcome once the channel closed and the output is complete: it
// waits for a kill order in flight, releases the channel and the command's place on
// its connection, and closes Done.
func (p *Process) settle() {
	from := p.tear.Settling()
	lost := p.awaitVerdict(from)
	cut := p.tear.AwaitKill()
	p.ch.Close()
	remnant := p.unregister(from, cut)
	err := p.failure(from, lost)
	p.closeStreams(err)
	p.forget(remnant)
	p.tear.Settle(err)
}

// awaitVerdict waits, when the channel closed without an exit status, for the
// connection's verdict: usually it broke (the library closes the channels before it
// reports the loss), and then the loss is reported as such and the remote command is
// remembered for killing. It returns the connection's LostError, or nil.
func (p *Process) awaitVerdict(from proc.Phase) error {
	p.mu.Lock()
	lost, failed := p.lost, p.startErr != nil
	p.mu.Unlock()
	if lost != nil || from.Exited() || failed {
		return lost
	}
	select {
	case <-p.c.dead:
	case <-time.After(time.Second):
	}
	lerr := p.c.lostErr()
	if lerr == nil {
		return nil
	}
	p.mu.Lock()
	p.lost = lerr
	p.mu.Unlock()
	return lerr
}

// unregister tells the control shell that the command ended — unless its output was
// cut after its exit and nothing killed it: then something it left running holds the
// output (`cmd &`), and that remnant stays registered and is ended when the Host
// closes, as locally. It reports such a remnant.
func (p *Process) unregister(from proc.Phase, cut bool) (remnant bool) {
	p.mu.Lock()
	started, pid := p.start == startDone, p.pid
	p.mu.Unlock()
	remnant = cut && !from.Killing() && started
	if started && !remnant {
		p.c.tell("u " + strconv.Itoa(pid) + "\n")
	}
	return remnant
}

// failure is the infrastructure failure that ended the command without an exit
// status: the lost connection, or a channel that closed without one; nil when the
// command exited (or never started).
func (p *Process) failure(from proc.Phase, lost error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case from.Exited():
		return nil
	case lost != nil:
		return lost
	case p.start == startDone:
		return fmt.Errorf("ssh: %s: the command's channel closed without an exit status", p.h.set.address)
	}
	return nil
}

// closeStreams ends the captured output; a failure of a command that started is the
// last line of its stderr, so that a background job shows it.
func (p *Process) closeStreams(failure error) {
	p.mu.Lock()
	note := ""
	if failure != nil && p.start == startDone {
		note = failure.Error() + "\n"
		if p.errLast != 0 && p.errLast != '\n' {
			note = "\n" + note
		}
	}
	p.mu.Unlock()
	if note != "" {
		_, _ = p.stderr.Write([]byte(note))
	}
	p.stdout.Close()
	p.stderr.Close()
}

// forget releases the command's place on its connection, remembering a remnant's
// group to kill when the Host closes.
func (p *Process) forget(remnant bool) {
	p.mu.Lock()
	g := group{pid: p.pid, birth: p.birth, graceMs: p.graceMs}
	p.mu.Unlock()
	h := p.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if remnant {
		h.remnants = append(h.remnants, g)
		if len(h.remnants) > maxRemnants {
			h.remnants = h.remnants[len(h.remnants)-maxRemnants:]
		}
	}
	delete(h.live, p)
	delete(p.c.procs, p)
	p.c.used--
	h.notifyLocked()
}

// spawnFailure explains a command that ended before its start line: the login shell
// found no bash, or failed otherwise.
func (p *Process) spawnFailure() error {
	ex, _ := p.tear.Exit()
	if ex.Err != nil {
		return ex.Err
	}
	if ex.Code != nil && *ex.Code == 127 {
		return spawnError("exec", "bash", syscall.ENOENT)
	}
	p.mu.Lock()
	msg := strings.TrimSpace(string(p.preStderr))
	p.mu.Unlock()
	if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
		msg = msg[i+1:]
	}
	status := "no exit status"
	switch {
	case ex.Code != nil:
		status = fmt.Sprintf("exit status %d", *ex.Code)
	case ex.Signal != "":
		status = "signal " + ex.Signal
	}
	if msg != "" {
		status += ": " + msg
	}
	return fmt.Errorf("spawn failed: the remote login shell did not start the command (%s)", status)
}

// spawnError is the local form of a remote start failure.
func spawnError(op, path string, errno syscall.Errno) error {
	return &proc.SpawnError{Op: op, Path: path, Err: errno}
}
