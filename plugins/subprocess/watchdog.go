package subprocess

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/plugins/subprocess/internal/watchdog"
	"github.com/dsh-dev/dsh/proc"
)

// watchdogProc is the Supervisor's end of its watchdog (see package internal/watchdog):
// the write end of the pipe the watchdog reads, which closes when the harness exits or
// dies. The watchdog is no child of the harness: nothing reaps it here. It is supervised
// instead (see supervise): when it dies, a new one takes over.
type watchdogProc struct {
	cgroupDir string // what it guards ("" without cgroups)
	log       *slog.Logger
	stopping  chan struct{} // closed by stop: supervise returns
	done      chan struct{} // closed when supervise returns

	mu   sync.Mutex
	pid  int
	fd   int // the pipe's write end (non-blocking, close-on-exec); changed by supervise only
	pipe *os.File
	// pipe is fd registered with the runtime's poller, which reports the pipe's error
	// (no reader left) when the watchdog dies: supervise waits there, not in a blocking
	// poll(2) that would hold a processor (with one P, every goroutine) until the
	// runtime took it back. Closing it closes fd.
	groups map[int]struct{}    // the process groups it was told to kill, and not told to forget
	dirs   map[string]struct{} // the cgroup v1 directories it was told to empty and remove
	warned bool                // a lost message was logged (once per watchdog)
}

// startWatchdog starts the watchdog for the cgroup directory cgroupDir ("" without
// cgroups) and its supervision, and returns once it runs: the one the binary's main
// started early (watchdog.Prestart), or else a new one. holding, if not nil, is called
// as soon as the watchdog's first stage runs with the pipe's read end (see forkStage).
func startWatchdog(cgroupDir string, log *slog.Logger, holding func()) (*watchdogProc, error) {
	fd, pid, err := takeEarlyWatchdog(cgroupDir, log, holding)
	if err != nil {
		fd, pid, err = spawnWatchdog(cgroupDir, log, holding)
	}
	if err != nil {
		return nil, err
	}
	w := &watchdogProc{cgroupDir: cgroupDir, log: log, stopping: make(chan struct{}), done: make(chan struct{}),
		pid: pid, fd: fd, pipe: os.NewFile(uintptr(fd), "watchdog"),
		groups: map[int]struct{}{}, dirs: map[string]struct{}{}}
	go w.supervise()
	return w, nil
}

// errNoEarly: the binary's main started no watchdog early, or another Supervisor took it.
var errNoEarly = errors.New("no early watchdog")

// takeEarlyWatchdog takes over the watchdog watchdog.Prestart started: it names the
// cgroup directory to it — before holding, so that a crash from then on finds it —
// and returns the pipe's write end and the watchdog's pid, as spawnWatchdog does.
func takeEarlyWatchdog(cgroupDir string, log *slog.Logger, holding func()) (fd, pid int, err error) {
	e, ok := watchdog.Take()
	if !ok {
		return -1, 0, errNoEarly
	}
	if cgroupDir != "" && len(cgroupDir) < watchdog.MaxDir && !strings.ContainsRune(cgroupDir, '\n') {
		err = writeAll(e.In, []byte("c"+cgroupDir+"\n"), 0)
	}
	if err == nil && holding != nil {
		holding()
	}
	_ = unix.SetNonblock(e.Out, true) // pollable, as forkStage's
	pid, perr := awaitStage(e.Stage, os.NewFile(uintptr(e.Out), "watchdog stage"))
	if err == nil {
		err = perr
	}
	if err != nil {
		unix.Close(e.In)
		log.Warn("subprocess: the early crash-cleanup watchdog did not start; starting another", "err", err)
		return -1, 0, err
	}
	if err := unix.SetNonblock(e.In, true); err != nil {
		log.Warn("subprocess: the crash-cleanup pipe stays blocking", "err", err)
	}
	return e.In, pid, nil
}

// spawnWatchdog starts a watchdog and returns the write end of its pipe and its pid.
func spawnWatchdog(cgroupDir string, log *slog.Logger, holding func()) (fd, pid int, err error) {
	var in [2]int
	if err := unix.Pipe2(in[:], unix.O_CLOEXEC); err != nil {
		return -1, 0, &opError{op: "pipe", err: err}
	}
	stage, out, err := forkStage(in[0], cgroupDir)
	unix.Close(in[0])
	if err == nil {
		if holding != nil {
			holding()
		}
		pid, err = awaitStage(stage, out)
	}
	if err != nil {
		unix.Close(in[1])
		return -1, 0, err
	}
	if err := unix.SetNonblock(in[1], true); err != nil {
		log.Warn("subprocess: the crash-cleanup pipe stays blocking", "err", err)
	}
	return in[1], pid, nil
}

// forkStage starts the watchdog's first stage with stdin (watchdog.ForkStage), its
// output pollable, so that awaitStage's read can time out.
func forkStage(stdin int, cgroupDir string) (stage int, out *os.File, err error) {
	stage, fd, err := watchdog.ForkStage(stdin, cgroupDir)
	if err != nil {
		return 0, nil, &opError{op: "exec", path: "/proc/self/exe", err: err}
	}
	_ = unix.SetNonblock(fd, true)
	return stage, os.NewFile(uintptr(fd), "watchdog stage"), nil
}

// awaitStage reads the watchdog's pid from the first stage's output out (which it
// closes) and reaps the first stage.
func awaitStage(stage int, out *os.File) (int, error) {
	defer out.Close()
	_ = out.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, rerr := io.ReadAll(out)
	if rerr != nil {
		_ = unix.Kill(stage, unix.SIGKILL)
	}
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(stage, &ws, 0, nil); err != syscall.EINTR {
			break
		}
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(got)))
	if rerr != nil || err != nil || pid <= 0 {
		return 0, fmt.Errorf("the watchdog did not start (first stage: %v, output %q, read: %v)", ws, got, rerr)
	}
	return pid, nil
}

// track tells the watchdog to SIGKILL process group pgid if the harness dies.
func (w *watchdogProc) track(pgid int) { w.send('+', pgid) }

// untrack tells the watchdog to forget pgid; it must come before the group's id may be
// reused (before its leader is reaped).
func (w *watchdogProc) untrack(pgid int) { w.send('-', pgid) }

// removeDir tells the watchdog to kill what is left in the cgroup v1 directory dir
// (an instance directory of resource limits) and remove it if the harness dies.
func (w *watchdogProc) removeDir(dir string) {
	if w == nil || len(dir) >= watchdog.MaxDir || strings.ContainsRune(dir, '\n') {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dirs[dir] = struct{}{}
	w.write(append(append([]byte{'d'}, dir...), '\n'))
}

func (w *watchdogProc) send(op byte, pgid int) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if op == '+' {
		w.groups[pgid] = struct{}{}
	} else {
		delete(w.groups, pgid)
	}
	var buf [24]byte
	w.write(append(strconv.AppendInt(append(buf[:0], op), int64(pgid), 10), '\n'))
}

// write sends msg to the watchdog in charge; w.mu is held.
func (w *watchdogProc) write(msg []byte) {
	if w.fd < 0 {
		return
	}
	err := writeAll(w.fd, msg, 0)
	if err == nil || w.warned {
		return
	}
	// A full pipe (a stopped watchdog) loses this message; a broken one means the
	// watchdog died, and its successor is told everything (see supervise).
	w.warned = true
	w.log.Warn("subprocess: the crash-cleanup watchdog is not listening; a crash of the harness may leave commands running", "err", proc.ErrnoText(err))
}

// writeAll writes msg to the non-blocking fd, waiting up to patience for room when the
// pipe is full.
func writeAll(fd int, msg []byte, patience time.Duration) error {
	deadline := time.Now().Add(patience)
	for len(msg) > 0 {
		n, err := unix.Write(fd, msg)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN) && time.Until(deadline) > 0:
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
			_, _ = unix.Poll(pfd, int(time.Until(deadline)/time.Millisecond)+1)
			continue
		case err != nil:
			return err
		}
		msg = msg[n:]
	}
	return nil
}

// Restart pacing: a watchdog that dies within restartQuick of its start, after one that
// did too, is replaced after a delay that doubles from restartDelayMin up to
// restartDelayMax, so that something killing every watchdog at once does not make the
// harness fork in a loop. The first replacement starts at once.
const (
	restartQuick    = 10 * time.Second
	restartDelayMin = 100 * time.Millisecond
	restartDelayMax = 30 * time.Second
)

// supervise waits for the watchdog to die — its end of the pipe closes, which the write
// end reports as an error — and then logs it, starts a new watchdog and tells it every
// process group the old one knew, so that a crash of the harness after the restart
// still ends every command. It returns when stop is called.
func (w *watchdogProc) supervise() {
	defer close(w.done)
	quick := 0 // watchdogs in a row that died soon after their start
	started := time.Now()
	for w.awaitDeath() {
		w.mu.Lock()
		dead := w.pid
		w.mu.Unlock()
		w.log.Warn("subprocess: the crash-cleanup watchdog died; starting a new one", "pid", dead)
		if time.Since(started) < restartQuick {
			quick++
		} else {
			quick = 0
		}
		delay := time.Duration(0)
		if quick > 1 {
			delay = min(restartDelayMin<<min(quick-2, 16), restartDelayMax)
		}
		for {
			if delay > 0 && !w.pause(delay) {
				return
			}
			fd, pid, err := spawnWatchdog(w.cgroupDir, w.log, nil)
			if err == nil {
				w.takeOver(fd, pid)
				break
			}
			delay = min(max(2*delay, restartDelayMin), restartDelayMax)
			w.log.Warn("subprocess: cannot start a new crash-cleanup watchdog; retrying", "err", err, "in", delay)
		}
		started = time.Now()
	}
}

// pause waits for d; false if stop was called meanwhile.
func (w *watchdogProc) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.stopping:
		return false
	}
}

// awaitDeath waits until the pipe's reader is gone (true) or stop is called (false).
// The wait parks in the runtime's poller; a pipe it cannot poll is checked twice a
// second instead.
func (w *watchdogProc) awaitDeath() bool {
	w.mu.Lock()
	pipe := w.pipe
	w.mu.Unlock()
	gone := make(chan error, 1)
	if rc, err := pipe.SyscallConn(); err == nil {
		go func() { gone <- rc.Read(func(fd uintptr) bool { return readerGone(int(fd)) }) }()
	} else {
		gone <- err
	}
	select {
	case err := <-gone:
		if err == nil {
			return true
		}
	case <-w.stopping:
		_ = pipe.SetReadDeadline(time.Now()) // ends the read above
		<-gone
		return false
	}
	return w.checkDeath(pipe)
}

// checkDeath is awaitDeath for a pipe the poller cannot wait on.
func (w *watchdogProc) checkDeath(pipe *os.File) bool {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	rc, err := pipe.SyscallConn()
	for {
		select {
		case <-tick.C:
		case <-w.stopping:
			return false
		}
		gone := err != nil
		if err == nil {
			_ = rc.Control(func(fd uintptr) { gone = readerGone(int(fd)) })
		}
		if gone {
			return true
		}
	}
}

// readerGone reports whether the pipe whose write end is fd has no reader left (an
// error or hang-up is pending on it), without waiting.
func readerGone(fd int) bool {
	pfd := []unix.PollFd{{Fd: int32(fd)}} // errors and hang-ups are reported whatever Events asks
	for {
		n, err := unix.Poll(pfd, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n > 0 && pfd[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0
	}
}

// takeOver makes the new watchdog (the write end fd of its pipe, pid) the one the
// Supervisor talks to, and tells it every process group and cgroup v1 directory it
// must know, before any other message can reach it.
func (w *watchdogProc) takeOver(fd, pid int) {
	w.mu.Lock()
	old := w.pipe
	w.fd, w.pid, w.warned = fd, pid, false
	w.pipe = os.NewFile(uintptr(fd), "watchdog")
	var msg []byte
	for pgid := range w.groups {
		msg = append(strconv.AppendInt(append(msg, '+'), int64(pgid), 10), '\n')
	}
	for dir := range w.dirs {
		msg = append(append(append(msg, 'd'), dir...), '\n')
	}
	err := writeAll(fd, msg, time.Second)
	groups := len(w.groups)
	w.mu.Unlock()
	_ = old.Close()
	if err != nil {
		w.log.Warn("subprocess: cannot tell the new crash-cleanup watchdog every command; a crash of the harness may leave some running", "pid", pid, "err", proc.ErrnoText(err))
		return
	}
	w.log.Info("subprocess: a new crash-cleanup watchdog took over", "pid", pid, "groups", groups)
}

// currentPid is the pid of the watchdog in charge.
func (w *watchdogProc) currentPid() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pid
}

// stop ends the supervision, then closes the pipe, which makes the watchdog end what is
// left of the harness's commands (nothing, after a Close that finished) and exit.
func (w *watchdogProc) stop() {
	if w == nil {
		return
	}
	close(w.stopping)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.pipe.Close()
	w.fd = -1
}
