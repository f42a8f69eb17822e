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
	wake      int           // an eventfd: stop wakes supervise through it
	done      chan struct{} // closed when supervise returns

	mu     sync.Mutex
	pid    int
	fd     int                 // the pipe's write end (non-blocking, close-on-exec); changed by supervise only
	groups map[int]struct{}    // the process groups it was told to kill, and not told to forget
	dirs   map[string]struct{} // the cgroup v1 directories it was told to empty and remove
	warned bool                // a lost message was logged (once per watchdog)
}

// startWatchdog starts the watchdog for the cgroup directory cgroupDir ("" without
// cgroups) and its supervision, and returns once it runs. holding, if not nil, is
// called as soon as the first stage runs with the pipe's read end (see detachWatchdog).
func startWatchdog(cgroupDir string, log *slog.Logger, holding func()) (*watchdogProc, error) {
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return nil, &opError{op: "eventfd", err: err}
	}
	fd, pid, err := spawnWatchdog(cgroupDir, log, holding)
	if err != nil {
		unix.Close(wake)
		return nil, err
	}
	w := &watchdogProc{cgroupDir: cgroupDir, log: log, wake: wake, done: make(chan struct{}),
		pid: pid, fd: fd, groups: map[int]struct{}{}, dirs: map[string]struct{}{}}
	go w.supervise()
	return w, nil
}

// spawnWatchdog starts a watchdog and returns the write end of its pipe and its pid.
func spawnWatchdog(cgroupDir string, log *slog.Logger, holding func()) (fd, pid int, err error) {
	var in [2]int
	if err := unix.Pipe2(in[:], unix.O_CLOEXEC); err != nil {
		return -1, 0, &opError{op: "pipe", err: err}
	}
	pid, err = detachWatchdog(in[0], cgroupDir, holding)
	unix.Close(in[0])
	if err != nil {
		unix.Close(in[1])
		return -1, 0, err
	}
	if err := unix.SetNonblock(in[1], true); err != nil {
		log.Warn("subprocess: the crash-cleanup pipe stays blocking", "err", err)
	}
	return in[1], pid, nil
}

// detachWatchdog runs the watchdog's first stage with stdin, which starts the watchdog,
// reports its pid and exits; it returns that pid. holding, if not nil, is called once
// the first stage runs: it holds stdin, and starts the watchdog with it even if the
// harness dies now.
func detachWatchdog(stdin int, cgroupDir string, holding func()) (int, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer r.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		w.Close()
		return 0, err
	}
	// /proc/self/exe is this very binary even if its file was replaced or deleted since.
	stage, err := syscall.ForkExec("/proc/self/exe", []string{os.Args[0], watchdog.Arg, watchdog.StageDetach, cgroupDir}, &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{},
		Files: []uintptr{uintptr(stdin), w.Fd(), devnull.Fd()},
	})
	w.Close()
	devnull.Close()
	if err != nil {
		return 0, &opError{op: "exec", path: "/proc/self/exe", err: err}
	}
	if holding != nil {
		holding()
	}
	_ = r.SetReadDeadline(time.Now().Add(10 * time.Second))
	out, rerr := io.ReadAll(r)
	if rerr != nil {
		_ = unix.Kill(stage, unix.SIGKILL)
	}
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(stage, &ws, 0, nil); err != syscall.EINTR {
			break
		}
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if rerr != nil || err != nil || pid <= 0 {
		return 0, fmt.Errorf("the watchdog did not start (first stage: %v, output %q, read: %v)", ws, out, rerr)
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
// end reports (POLLERR) — and then logs it, starts a new watchdog and tells it every
// process group the old one knew, so that a crash of the harness after the restart
// still ends every command. It returns when stop wakes it.
func (w *watchdogProc) supervise() {
	defer close(w.done)
	quick := 0 // watchdogs in a row that died soon after their start
	started := time.Now()
	for w.await(w.fd, -1) {
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
			if delay > 0 && !w.await(-1, delay) {
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

// await waits until the pipe's reader is gone (true), stop is called (false) or, with
// timeout ≥ 0 and fd < 0, timeout passes (true).
func (w *watchdogProc) await(fd int, timeout time.Duration) bool {
	ms := -1
	if timeout >= 0 {
		ms = int(timeout / time.Millisecond)
	}
	pfds := []unix.PollFd{{Fd: int32(w.wake), Events: unix.POLLIN}, {Fd: int32(fd)}}
	for {
		n, err := unix.Poll(pfds, ms)
		switch {
		case errors.Is(err, unix.EINTR):
			continue // a signal; Go's handlers restart nothing else here
		case err != nil:
			w.log.Error("subprocess: cannot watch the crash-cleanup watchdog", "err", proc.ErrnoText(err))
			return false
		case pfds[0].Revents != 0:
			return false
		case n == 0 || pfds[1].Revents != 0: // POLLERR: no reader is left
			return true
		}
	}
}

// takeOver makes the new watchdog (the write end fd of its pipe, pid) the one the
// Supervisor talks to, and tells it every process group and cgroup v1 directory it
// must know, before any other message can reach it.
func (w *watchdogProc) takeOver(fd, pid int) {
	w.mu.Lock()
	old := w.fd
	w.fd, w.pid, w.warned = fd, pid, false
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
	unix.Close(old)
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
	var one [8]byte
	one[0] = 1 // any non-zero increment makes the eventfd readable
	if _, err := unix.Write(w.wake, one[:]); err != nil {
		w.log.Error("subprocess: cannot stop watching the crash-cleanup watchdog", "err", proc.ErrnoText(err))
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	unix.Close(w.fd)
	w.fd = -1
	unix.Close(w.wake)
}
