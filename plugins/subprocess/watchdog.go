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
// dies. The watchdog is no child of the harness: nothing reaps it here.
type watchdogProc struct {
	pid int
	log *slog.Logger

	mu     sync.Mutex
	fd     int // the pipe's write end (non-blocking, close-on-exec), -1 once closed
	warned bool
}

// startWatchdog starts the watchdog for the cgroup directory cgroupDir ("" without
// cgroups) and returns once it runs. holding, if not nil, is called as soon as the
// first stage runs with the pipe's read end (see detachWatchdog).
func startWatchdog(cgroupDir string, log *slog.Logger, holding func()) (*watchdogProc, error) {
	var in [2]int
	if err := unix.Pipe2(in[:], unix.O_CLOEXEC); err != nil {
		return nil, &opError{op: "pipe", err: err}
	}
	pid, err := detachWatchdog(in[0], cgroupDir, holding)
	unix.Close(in[0])
	if err != nil {
		unix.Close(in[1])
		return nil, err
	}
	if err := unix.SetNonblock(in[1], true); err != nil {
		log.Warn("subprocess: the crash-cleanup pipe stays blocking", "err", err)
	}
	return &watchdogProc{pid: pid, log: log, fd: in[1]}, nil
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
	if w != nil && len(dir) < watchdog.MaxDir && !strings.ContainsRune(dir, '\n') {
		w.write(append(append([]byte{'d'}, dir...), '\n'))
	}
}

func (w *watchdogProc) send(op byte, pgid int) {
	if w == nil {
		return
	}
	var buf [24]byte
	w.write(append(strconv.AppendInt(append(buf[:0], op), int64(pgid), 10), '\n'))
}

func (w *watchdogProc) write(msg []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		return
	}
	_, err := unix.Write(w.fd, msg)
	for errors.Is(err, unix.EINTR) {
		_, err = unix.Write(w.fd, msg)
	}
	if err == nil {
		return
	}
	// A full pipe (a stopped watchdog) loses this message; a broken one, the watchdog.
	if !w.warned {
		w.warned = true
		w.log.Warn("subprocess: the crash-cleanup watchdog is not listening; a crash of the harness may leave commands running", "err", proc.ErrnoText(err))
	}
	if errors.Is(err, unix.EPIPE) {
		unix.Close(w.fd)
		w.fd = -1
	}
}

// stop closes the pipe, which makes the watchdog end what is left of the harness's
// commands (nothing, after a Close that finished) and exit.
func (w *watchdogProc) stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}
