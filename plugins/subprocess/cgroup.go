package subprocess

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/proc"
)

// cgroupRoot is the per-harness cgroup v2 directory under which every command gets a
// child cgroup of its own. Empty cgroups of settled commands are kept (their directory
// and its cgroup.events held open) for reuse, up to maxFreeCgroups, which saves a mkdir,
// two opens and an rmdir per command. The directory is held open and locked (flock)
// while the harness lives, which tells a live harness's directory from a dead one's.
type cgroupRoot struct {
	dir    string
	lockFD int
	// maxFree is how many emptied cgroups it keeps for reuse: 0 for maxFreeCgroups, -1
	// for none (a session's cgroups of resource limits, whose counters must start at
	// zero).
	maxFree int

	mu   sync.Mutex
	free []*cgroup
}

const maxFreeCgroups = 8

// newCgroupRoot finds the cgroup v2 hierarchy this process lives in and creates a
// uniquely named directory for this harness below its own cgroup. It fails, with the
// reason, when cgroup v2 is absent, not writable, or lacks cgroup.kill (Linux < 5.14).
// What dead harnesses left there is killed and removed first.
func newCgroupRoot(log *slog.Logger) (*cgroupRoot, error) {
	base, err := ownCgroup2Dir()
	if err != nil {
		return nil, err
	}
	killDeadInstances(base, log)
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return nil, err
	}
	dir := filepath.Join(base, fmt.Sprintf("dsh-%d-%s", os.Getpid(), hex.EncodeToString(suffix)))
	if err := unix.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup v2 at %s is not writable: mkdir: %s", base, proc.ErrnoText(err))
	}
	if err := unix.Access(filepath.Join(dir, "cgroup.kill"), unix.W_OK); err != nil {
		_ = unix.Rmdir(dir)
		return nil, fmt.Errorf("cgroup v2 at %s has no writable cgroup.kill (Linux 5.14 or newer is needed): %s", base, proc.ErrnoText(err))
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		_ = unix.Rmdir(dir)
		return nil, fmt.Errorf("cgroup v2 at %s: cannot lock %s: %s", base, dir, proc.ErrnoText(err))
	}
	return &cgroupRoot{dir: dir, lockFD: fd}, nil
}

// close removes the harness's cgroup directory (what is left below it must be empty)
// and releases its lock.
func (r *cgroupRoot) close() error {
	r.drain()
	err := removeCgroupDir(r.dir)
	unix.Close(r.lockFD)
	return err
}

// killDeadInstances kills and removes what harnesses that died left below base: their
// cgroup directories (dsh-<pid>-<random>) whose lock nobody holds and whose pid is
// gone. A harness killed with SIGKILL leaves its commands running there, unless its
// watchdog ended them.
func killDeadInstances(base string, log *slog.Logger) {
	baseFD, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(baseFD)
	killed, instances := 0, 0
	proc.RemoveDeadInstances(baseFD, "dsh-", func(name string) {
		dir := filepath.Join(base, name)
		if n := populatedCgroups(dir); n > 0 {
			killed += n
			instances++
			_ = writeSmallFile(dir+"/cgroup.kill", "1")
			if gone, ok := awaitCgroupEmpty(dir, time.Now().Add(5*time.Second)); !gone && !ok {
				for i := 0; i < 500 && cgroupPopulated(dir); i++ {
					time.Sleep(10 * time.Millisecond) // no inotify: start-up only
				}
			}
		}
		if err := removeCgroupDir(dir); err != nil {
			log.Warn("subprocess: cannot remove the cgroup of a dead harness", "err", err)
		}
	})
	if killed > 0 {
		log.Warn("subprocess: killed the commands that dead dsh instances left running", "cgroups", killed, "instances", instances)
	}
}

// populatedCgroups counts the populated cgroups directly below dir (one per command), or
// 1 if only dir itself holds processes.
func populatedCgroups(dir string) int {
	if !cgroupPopulated(dir) {
		return 0
	}
	n := 0
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() && cgroupPopulated(filepath.Join(dir, e.Name())) {
			n++
		}
	}
	return max(n, 1)
}

// ownCgroup2Dir returns the directory of this process's cgroup in the cgroup v2
// hierarchy, located through /proc/self/cgroup ("0::<path>") and the cgroup2 entry of
// /proc/self/mountinfo.
func ownCgroup2Dir() (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("cgroup v2 unavailable: %w", err)
	}
	rel, found := "", false
	for _, line := range strings.Split(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			rel, found = p, true
			break
		}
	}
	if !found {
		return "", errors.New("cgroup v2 unavailable: no unified hierarchy entry in /proc/self/cgroup")
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("cgroup v2 unavailable: %w", err)
	}
	for _, line := range strings.Split(string(info), "\n") {
		fields := strings.Fields(line)
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(fields) || fields[sep+1] != "cgroup2" {
			continue
		}
		root, mnt := unescapeMount(fields[3]), unescapeMount(fields[4])
		if root != "/" && rel != root && !strings.HasPrefix(rel, root+"/") {
			continue
		}
		sub := strings.TrimPrefix(rel, root)
		return filepath.Join(mnt, sub), nil
	}
	return "", errors.New("cgroup v2 unavailable: no cgroup2 mount in /proc/self/mountinfo")
}

// unescapeMount decodes the octal escapes (\040 for a space…) of a mountinfo field.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroup is one command's cgroup.
type cgroup struct {
	path string
	fd   int // open directory, for clone3(CLONE_INTO_CGROUP); -1 once closed
	// events is its open cgroup.events, re-read in place (one pread) when a command
	// settles; -1 once closed.
	events int
	// stat is its cpu.stat, opened the first time its CPU time is read (cpuMs) and
	// kept while the cgroup is; statOpen says it is.
	stat     int
	statOpen bool
	// usedMs is the CPU time its earlier commands used, when known without a read
	// (usedKnown): 0 for a new directory, or what a command's settle read once nothing
	// was left in it (all but the last exiting task's final tick of exit work, under a
	// millisecond, which the next command's usage then counts). It spares a command
	// with resource limits, whose usage is its CPU time less this, a read of cpu.stat at
	// its start.
	usedMs    int64
	usedKnown bool
	// killed is set once cgroup.kill was written. Such a cgroup is never reused: on
	// Linux 6.18 (at least) every later clone3(CLONE_INTO_CGROUP) into it is SIGKILLed.
	killed atomic.Bool
}

// get returns an empty cgroup for a new command: a recycled one — for a command whose
// CPU time is accounted (counted), preferably one whose usedMs is known, otherwise
// preferably one whose is not — or a new directory.
func (r *cgroupRoot) get(id uint64, counted bool) (*cgroup, error) {
	r.mu.Lock()
	if n := len(r.free); n > 0 {
		i := n - 1
		for j := n - 1; j >= 0; j-- {
			if r.free[j].usedKnown == counted {
				i = j
				break
			}
		}
		cg := r.free[i]
		r.free = slices.Delete(r.free, i, i+1)
		r.mu.Unlock()
		return cg, nil
	}
	r.mu.Unlock()
	return r.create(id)
}

// put recycles the emptied cgroup of a settled command, or removes it.
func (r *cgroupRoot) put(cg *cgroup) {
	keep := maxFreeCgroups
	if r.maxFree != 0 {
		keep = max(r.maxFree, 0)
	}
	r.mu.Lock()
	if len(r.free) < keep && cg.fd >= 0 && !cg.killed.Load() {
		r.free = append(r.free, cg)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	_ = cg.remove()
}

// drain removes the recycled cgroups (Close).
func (r *cgroupRoot) drain() {
	r.mu.Lock()
	free := r.free
	r.free = nil
	r.mu.Unlock()
	for _, cg := range free {
		_ = cg.remove()
	}
}

func (r *cgroupRoot) create(id uint64) (*cgroup, error) {
	path := r.dir + "/c" + strconv.FormatUint(id, 10)
	if err := mkdirCgroup(path); err != nil {
		return nil, &opError{op: "mkdir", path: path, err: err}
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = unix.Rmdir(path)
		return nil, &opError{op: "open", path: path, err: err}
	}
	events, err := unix.Openat(fd, "cgroup.events", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = unix.Close(fd)
		_ = unix.Rmdir(path)
		return nil, &opError{op: "open", path: path + "/cgroup.events", err: err}
	}
	return &cgroup{path: path, fd: fd, events: events, usedKnown: true}, nil
}

// closeFD closes the cgroup's descriptors; it is then found by path.
func (c *cgroup) closeFD() {
	if c.fd >= 0 {
		_ = unix.Close(c.fd)
		c.fd = -1
	}
	if c.events >= 0 {
		_ = unix.Close(c.events)
		c.events = -1
	}
	if c.statOpen {
		_ = unix.Close(c.stat)
		c.statOpen = false
	}
}

// cpuMs is the CPU time the cgroup's processes used so far, in milliseconds (its
// cpu.stat, kept open once read: a command's usage reads it when it settles, and when
// it starts unless usedMs is known).
func (c *cgroup) cpuMs() (int64, bool) {
	if !c.statOpen && c.fd >= 0 {
		fd, err := unix.Openat(c.fd, "cpu.stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return 0, false
		}
		c.stat, c.statOpen = fd, true
	}
	if !c.statOpen {
		return cgDir{path: c.path, v2: true}.cpuMs()
	}
	var buf [smallFile]byte
	return cpuStatMs(preadSmall(c.stat, buf[:]))
}

// kill SIGKILLs every process in the cgroup and its descendants (cgroup.kill).
func (c *cgroup) kill() {
	c.killed.Store(true)
	_ = writeSmallFile(c.path+"/cgroup.kill", "1")
}

// populated reports whether any live process remains in the cgroup or below. An
// unreadable cgroup counts as populated (the caller keeps watching it).
func (c *cgroup) populated() bool {
	if c.events >= 0 {
		return eventsPopulated(c.events)
	}
	return cgroupPopulated(c.path)
}

func cgroupPopulated(path string) bool {
	fd, err := unix.Open(path+"/cgroup.events", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return !errors.Is(err, unix.ENOENT)
	}
	defer unix.Close(fd)
	return eventsPopulated(fd)
}

// eventsPopulated reads an open cgroup.events from its start (the kernel renders it
// afresh on each read at offset 0).
func eventsPopulated(fd int) bool {
	var buf [128]byte
	n, err := unix.Pread(fd, buf[:], 0)
	if err != nil || n <= 0 {
		return true
	}
	return !bytes.Contains(buf[:n], []byte("populated 0"))
}

// remove deletes the cgroup directory and any (empty) cgroups a nested harness made
// below it. It fails with EBUSY while a process remains.
func (c *cgroup) remove() error {
	c.closeFD()
	return removeCgroupDir(c.path)
}

func removeCgroupDir(dir string) error {
	err := unix.Rmdir(dir)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if errors.Is(err, unix.EBUSY) && cgroupPopulated(dir) {
		return fmt.Errorf("rmdir %s: %s", dir, proc.ErrnoText(err))
	}
	// Not empty: cgroups a nested harness made below this one.
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			_ = removeCgroupDir(filepath.Join(dir, e.Name()))
		}
	}
	if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("rmdir %s: %s", dir, proc.ErrnoText(err))
	}
	return nil
}

// opError is a failed operation on a path, worded "<op> <path>: ENOENT (…)"; it unwraps
// to the errno.
type opError struct {
	op, path string
	err      error
}

func (e *opError) Error() string { return e.op + " " + e.path + ": " + proc.ErrnoText(e.err) }
func (e *opError) Unwrap() error { return e.err }

// writeSmallFile writes content to the existing file path in one write (O_TRUNC, as a
// shell's redirection opens it: cgroupfs ignores it, a plain file gets the content
// alone).
func writeSmallFile(path, content string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, err = unix.Write(fd, []byte(content))
	return err
}

// signalCgroup sends sig to every process of the cgroup dir and its descendants, and
// reports whether it could list them. The pids come from cgroup.procs, so the cgroup
// is frozen meanwhile where the kernel allows it: a frozen process cannot exit (short
// of a SIGKILL from elsewhere), so no listed pid can be freed and reused by an
// unrelated process before its signal goes out. Where freezing is unavailable or does
// not complete in time, the pids are signalled unfrozen.
func signalCgroup(dir string, sig syscall.Signal) bool {
	if freezeCgroup(dir) {
		defer thawCgroup(dir)
	}
	return signalCgroupProcs(dir, sig)
}

func signalCgroupProcs(dir string, sig syscall.Signal) bool {
	data, err := os.ReadFile(dir + "/cgroup.procs")
	if err != nil {
		return false
	}
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			_ = unix.Kill(pid, sig)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			signalCgroupProcs(filepath.Join(dir, e.Name()), sig)
		}
	}
	return true
}

// awaitCgroupEmpty waits until the cgroup dir has no live process, reporting gone, or
// until the deadline passes. ok is false when the cgroup cannot be watched (no
// inotify, a runtime poller that refuses the descriptor): the caller polls instead.
func awaitCgroupEmpty(dir string, deadline time.Time) (gone, ok bool) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return false, false
	}
	f := os.NewFile(uintptr(fd), "inotify")
	defer f.Close()
	// Watch first, then look: a change between the two is not missed.
	if _, err := unix.InotifyAddWatch(fd, dir+"/cgroup.events", unix.IN_MODIFY); err != nil {
		return false, false
	}
	if f.SetReadDeadline(deadline) != nil {
		return false, false
	}
	var buf [512]byte
	for {
		if !cgroupPopulated(dir) {
			return true, true
		}
		if _, err := f.Read(buf[:]); err != nil {
			return false, errors.Is(err, os.ErrDeadlineExceeded)
		}
	}
}

// freezeTimeout bounds the wait for a cgroup to report itself frozen (a process in an
// uninterruptible sleep delays it).
const freezeTimeout = 500 * time.Millisecond

// freezeCgroup freezes dir (and so its descendants) and waits until the kernel reports it
// frozen. It reports whether the caller must thaw it: false when freezing is unavailable
// (Linux < 5.2), when the cgroup was already frozen by someone else (it stays so), or
// when it did not freeze in time (it is thawed again).
func freezeCgroup(dir string) bool {
	var buf [8]byte
	fd, err := unix.Open(dir+"/cgroup.freeze", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if n, err := unix.Read(fd, buf[:]); err != nil || (n > 0 && buf[0] == '1') {
		return false
	}
	if _, err := unix.Pwrite(fd, []byte("1"), 0); err != nil {
		return false
	}
	if waitFrozen(dir, freezeTimeout) {
		return true
	}
	_, _ = unix.Pwrite(fd, []byte("0"), 0)
	return false
}

func thawCgroup(dir string) { _ = writeSmallFile(dir+"/cgroup.freeze", "0") }

// waitFrozen waits until cgroup.events says "frozen 1", sleeping in poll(2): the kernel
// signals every change of the file with POLLPRI.
func waitFrozen(dir string, d time.Duration) bool {
	fd, err := unix.Open(dir+"/cgroup.events", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(d)
	var buf [128]byte
	for {
		n, err := unix.Pread(fd, buf[:], 0)
		if err != nil {
			return false
		}
		if bytes.Contains(buf[:n], []byte("frozen 1")) {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
		if _, err := unix.Poll(fds, int(left/time.Millisecond)+1); err != nil && err != unix.EINTR {
			return false
		}
	}
}
