package bashsandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dsh-dev/dsh/plugins/bashsandbox/internal/launch"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
)

// A box is the per-session sandbox process: the dsh binary started once per session
// (and per box configuration) with BoxArg, in new namespaces unless the backend is
// Landlock-only, owned by the Supervisor like any command (its own cgroup in the
// harness's subtree, killed when the Supervisor closes), and talked to over a unix
// socket. Each confined command of the session is started by it, from a thread of its
// own that it confines first; it is the commands' parent, so it reports their exits and
// reaps them when the Supervisor releases them (see cmdStarter).
type box struct {
	conf boxConfig
	proc *subprocess.Process
	conn *launch.Conn

	mu    sync.Mutex
	state boxState
	// lost says why the box's connection is gone (its process ended, a message could not
	// be read, or dsh closed it); nil while it is up. Once set, no command starts in the
	// box, and every command waiting for an answer or an exit is told.
	lost    error
	nextID  uint64
	waiting map[uint64]chan boxReply  // Start and Check requests awaiting their answer
	exits   map[uint64]chan proc.Exit // started commands whose exit is not known yet
	live    int                       // commands started and not yet released
	// single: the box of one call (ownBox); releasing its command waits for it to exit.
	single bool
}

// boxState is what dsh wants of a box. It only moves forward:
//
//	open ──retire──▶ retired ──its last command released──▶ closed
//	open, retired ──kill──▶ closed
//
// A retired box is no longer handed to new calls, but starts the commands of calls it
// was handed already. A closed box starts nothing: its connection is closed, so its
// process exits (killed if it lingers), and its commands in the namespaces with it.
// Whether the connection is up is told apart by box.lost: a box of any state can lose
// it.
type boxState uint8

const (
	boxOpen boxState = iota
	boxRetired
	boxClosed
)

// boxConfig is what a box is built from: a box serves a call only if its configuration
// is the call's.
type boxConfig struct {
	namespaces bool
	network    string
	workspace  string // pinned root, "" for none
	roots      []string
	maskDirs   []string
	show       []string // files of the session's own shown through maskDirs (its audit log)
	tmpSize    int64    // of the private /tmp and /dev/shm (namespaces only)
	// spillGen is the spool's Generation when the box was opened (namespaces only): a
	// box shows the session's spill directory as it was then, so once a vanished one
	// was made afresh, a new box shows the new one.
	spillGen uint64
}

func (c boxConfig) equal(o boxConfig) bool {
	return c.namespaces == o.namespaces && c.network == o.network && c.workspace == o.workspace &&
		slices.Equal(c.roots, o.roots) && slices.Equal(c.maskDirs, o.maskDirs) && slices.Equal(c.show, o.show) && c.tmpSize == o.tmpSize &&
		c.spillGen == o.spillGen
}

// boxFiles are the host directories a box is built on.
type boxFiles struct {
	tmp   string   // the session's private temp dir
	stage string   // an empty directory for the box's new root
	ws    *os.File // the pinned workspace; nil for none
	// spill is the session's spill directory, at spillPath; nil for none. The caller
	// closes it once the box is open.
	spill     *os.File
	spillPath string
}

type boxReply struct {
	r   launch.Reply
	fds []int
}

// boxSetupTimeout bounds a box's start-up (generous: the host may be busy).
const boxSetupTimeout = 30 * time.Second

// openBox starts a box on sup for conf, built on files, with the protected paths and
// masked files known now, in the cgroups of session owner under limits.
func openBox(sup *subprocess.Supervisor, conf boxConfig, owner string, limits proc.ResourceLimits, files boxFiles, protect, maskFiles []string) (*box, error) {
	if process, conn, ok := takeAhead(sup, conf); ok {
		if b, err := setUpBox(process, conn, conf, files, protect, maskFiles); err == nil {
			return b, nil
		}
		// The box started ahead died, or failed its setup: a fresh one tells.
	}
	process, conn, err := spawnBox(sup, conf, owner, limits)
	if err != nil {
		return nil, err
	}
	return setUpBox(process, conn, conf, files, protect, maskFiles)
}

// setUpBox sends the box process its setup and, once it is ready, reads its messages;
// a box that does not get ready is killed.
func setUpBox(process *subprocess.Process, conn *launch.Conn, conf boxConfig, files boxFiles, protect, maskFiles []string) (*box, error) {
	b := &box{conf: conf, proc: process, conn: conn, waiting: map[uint64]chan boxReply{}, exits: map[uint64]chan proc.Exit{}}
	setup, fds := setupMessage(conf, files, protect, maskFiles)
	if err := b.handshake(setup.Encode(), fds); err != nil {
		b.kill()
		return nil, err
	}
	go b.read()
	return b, nil
}

// spawnBox starts the box process on sup (boxStarter), as a process of session owner
// under limits, and returns it with dsh's end of its control socket.
func spawnBox(sup *subprocess.Supervisor, conf boxConfig, owner string, limits proc.ResourceLimits) (*subprocess.Process, *launch.Conn, error) {
	if !dispatched.Load() {
		return nil, nil, errNotDispatched
	}
	exe, err := self()
	if err != nil {
		return nil, nil, err
	}
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("bash-sandbox: control socket: %w", err)
	}
	theirs := os.NewFile(uintptr(pair[1]), "dsh-sandbox-control")
	conn, err := launch.NewConn(pair[0])
	if err != nil {
		theirs.Close()
		return nil, nil, fmt.Errorf("bash-sandbox: control socket: %w", err)
	}
	diag := proc.Capture{MaxBytes: 4096}
	process, err := sup.Spawn(context.Background(), subprocess.Spec{
		Argv:      []string{exe, BoxArg},
		Stdout:    diag,
		Stderr:    diag,
		GraceMs:   2000,
		Start:     &boxStarter{namespaces: conf.namespaces, network: conf.network, ctl: theirs},
		Owner:     owner,
		Resources: limits,
		Hosts:     true, // the session's end closes it after its commands (endSession)
	})
	theirs.Close()
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("bash-sandbox: start the session sandbox: %w", err)
	}
	return process, conn, nil
}

// setupMessage is the Setup a box is sent first, with its descriptors: the pinned
// workspace, then the spill directory.
func setupMessage(conf boxConfig, files boxFiles, protect, maskFiles []string) (launch.Setup, []int) {
	setup := launch.Setup{
		Namespaces:    conf.namespaces,
		Network:       conf.network,
		Hold:          !conf.namespaces && launch.HoldAtExec(),
		Workspace:     conf.workspace,
		WritableRoots: conf.roots,
		TempDir:       files.tmp,
		Stage:         files.stage,
		MaskDirs:      conf.maskDirs,
		Protect:       protect,
		MaskFiles:     maskFiles,
		ShowFiles:     conf.show,
		TmpSize:       conf.tmpSize,
	}
	var fds []int
	if files.ws != nil {
		fds = append(fds, int(files.ws.Fd()))
	}
	if files.spill != nil {
		setup.Spill = files.spillPath
		fds = append(fds, int(files.spill.Fd()))
	}
	return setup, fds
}

// handshake sends the setup and waits for Ready.
func (b *box) handshake(setup []byte, fds []int) error {
	if err := b.conn.Send(setup, fds...); err != nil {
		return b.setupError(fmt.Errorf("send the setup: %w", err))
	}
	type recv struct {
		payload []byte
		fds     []int
		err     error
	}
	got := make(chan recv, 1)
	go func() {
		p, f, err := b.conn.Recv()
		got <- recv{p, f, err}
	}()
	t := time.NewTimer(boxSetupTimeout)
	defer t.Stop()
	var r recv
	select {
	case r = <-got:
	case <-t.C:
		b.conn.Close()
		<-got
		return b.setupError(fmt.Errorf("no answer within %s", boxSetupTimeout))
	}
	closeAll(r.fds)
	if r.err != nil {
		return b.setupError(r.err)
	}
	rep, err := launch.DecodeReply(r.payload)
	switch {
	case err != nil:
		return b.setupError(err)
	case rep.Type == launch.MsgFailed:
		return b.setupError(errors.New(rep.Message))
	case rep.Type != launch.MsgReady:
		return b.setupError(fmt.Errorf("unexpected answer %d to the setup", rep.Type))
	}
	return nil
}

// setupError words a failed start-up, with what the box wrote to stderr.
func (b *box) setupError(err error) error {
	msg := err.Error()
	if !errors.Is(err, launch.ErrClosed) {
		return fmt.Errorf("bash-sandbox: the session sandbox did not start: %s", msg)
	}
	b.conn.Close()
	select {
	case <-b.proc.Done():
	case <-time.After(5 * time.Second):
	}
	if line := strings.TrimSpace(b.proc.Stderr().Output().Text); line != "" {
		msg = strings.TrimPrefix(line, LauncherFailurePrefix)
	}
	return fmt.Errorf("bash-sandbox: the session sandbox did not start: %s", msg)
}

// read dispatches the box's messages until the connection fails.
func (b *box) read() {
	for {
		payload, fds, err := b.conn.Recv()
		if err != nil {
			b.fail()
			return
		}
		r, err := launch.DecodeReply(payload)
		if err != nil {
			closeAll(fds)
			b.fail()
			return
		}
		b.mu.Lock()
		switch r.Type {
		case launch.MsgStarted, launch.MsgFailed, launch.MsgChecked:
			if ch, ok := b.waiting[r.ID]; ok {
				delete(b.waiting, r.ID)
				ch <- boxReply{r, fds}
				fds = nil
			}
		case launch.MsgExited:
			if exit, ok := b.exits[r.ID]; ok {
				delete(b.exits, r.ID)
				exit <- proc.WaitExit(r.Code, syscall.Signal(r.Signal))
			}
		}
		b.mu.Unlock()
		closeAll(fds)
	}
}

// fail records that the box's connection is lost (see lose).
func (b *box) fail() { b.lose(nil) }

// lose records why the box's connection is gone — why, or, when nil, that dsh closed it
// or that its process ended — the first reason winning: waiting starts fail, and every
// command whose exit is not known yet is lost (in the namespaces it died with the box,
// the init of its PID namespace; without them the Supervisor kills its cgroup).
func (b *box) lose(why error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lost != nil {
		return
	}
	switch {
	case why != nil:
		b.lost = why
	case b.state == boxClosed:
		b.lost = errClosed
	default:
		b.lost = fmt.Errorf("bash-sandbox: the session sandbox (pid %d) ended; the command was killed with it", b.proc.Pid())
	}
	for id, ch := range b.waiting {
		close(ch)
		delete(b.waiting, id)
	}
	for id, exit := range b.exits {
		close(exit)
		delete(b.exits, id)
	}
	b.conn.Close()
}

// wedged ends a box that stopped answering (stopped by a signal, or stuck): it is
// killed at once, with its commands, and every call waiting on it is told so; the
// session's next call starts a new box. waited is how long it left a question
// unanswered.
func (b *box) wedged(waited time.Duration) {
	b.lose(fmt.Errorf("bash-sandbox: the session sandbox (pid %d) stopped answering (no answer in %dms); it was killed with its commands, and the session's next call starts a new one",
		b.proc.Pid(), waited.Milliseconds()))
	b.mu.Lock()
	b.state = boxClosed
	b.mu.Unlock()
	b.proc.KillNow()
}

// usable reports whether the box can be handed to a new call: open, its connection up.
func (b *box) usable() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == boxOpen && b.lost == nil
}

// starts reports whether the box starts commands (b.mu held): not closed, its
// connection up.
func (b *box) starts() bool { return b.state != boxClosed && b.lost == nil }

// idle reports whether a retired box has no command left, and is to be closed (b.mu
// held).
func (b *box) idle() bool { return b.state == boxRetired && b.live == 0 }

// retire stops new calls; the box closes once its last command is released.
func (b *box) retire() {
	b.mu.Lock()
	if b.state == boxOpen {
		b.state = boxRetired
	}
	idle := b.idle()
	b.mu.Unlock()
	if idle {
		b.close()
	}
}

// retireLater retires the box for a call that holds it and has not started its command
// yet: it closes once that command (the last) is released — not now, though idle.
func (b *box) retireLater() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == boxOpen {
		b.state = boxRetired
	}
}

// close ends the box: it exits when its connection closes (and the commands
// of its PID namespace with it); the Supervisor kills it if it has not within
// closeWait.
func (b *box) close() {
	b.mu.Lock()
	if b.state == boxClosed {
		b.mu.Unlock()
		return
	}
	b.state = boxClosed
	b.mu.Unlock()
	b.conn.Close()
	go func() {
		t := time.NewTimer(closeWait)
		defer t.Stop()
		select {
		case <-b.proc.Done():
		case <-t.C:
			b.proc.KillNow()
		}
	}()
}

// closeWait is how long a closed box has to exit by itself (it does within
// milliseconds), which leaves a session's end the rest of its 2 s.
const closeWait = time.Second

// kill ends the box at once.
func (b *box) kill() {
	b.mu.Lock()
	b.state = boxClosed
	b.mu.Unlock()
	b.conn.Close()
	b.proc.Kill()
}

// register reserves a command id for a start, with the channel its answer arrives on
// and the one its exit will; the command counts as live until it is released (or
// forgotten).
func (b *box) register() (uint64, chan boxReply, chan proc.Exit, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.starts() {
		return 0, nil, nil, b.failureLocked()
	}
	b.nextID++
	id := b.nextID
	reply := make(chan boxReply, 1)
	exit := make(chan proc.Exit, 1)
	b.waiting[id] = reply
	b.exits[id] = exit
	b.live++
	return id, reply, exit, nil
}

// release ends the life of command id in the box: the box reaps its leader; a retired
// box closes when its last command is released.
func (b *box) release(id uint64) {
	b.mu.Lock()
	alive := b.starts()
	b.live--
	idle := b.idle()
	b.mu.Unlock()
	if alive {
		_ = b.conn.Send(launch.Release{ID: id}.Encode())
	}
	if idle {
		b.close()
		if b.single {
			// Its PID namespace, and whatever the command left in it, goes first.
			b.awaitExit()
		}
	}
}

// awaitExit waits for the closed box's process to exit (close kills it after
// closeWait).
func (b *box) awaitExit() {
	t := time.NewTimer(2 * closeWait)
	defer t.Stop()
	select {
	case <-b.proc.Done():
	case <-t.C:
	}
}

// forget drops a command that never started (or cannot be followed).
func (b *box) forget(id uint64) {
	b.mu.Lock()
	delete(b.waiting, id)
	delete(b.exits, id)
	b.live--
	idle := b.idle()
	b.mu.Unlock()
	if idle {
		b.close()
	}
}

// failure is why the box starts no command, or why a command's exit is not known.
func (b *box) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failureLocked()
}

func (b *box) failureLocked() error {
	if b.lost != nil {
		return b.lost
	}
	return errClosed
}

// errClosed is the failure of a box that dsh closed.
var errClosed = errors.New("bash-sandbox: the session sandbox was closed")

func closeAll(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}
