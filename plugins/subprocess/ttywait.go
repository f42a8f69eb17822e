package subprocess

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Whether a command waits for input is read from /proc: a process of the terminal's
// foreground process group that is blocked in a system call reading the terminal —
// read(2) and its variants on a descriptor of the terminal, or select, poll or epoll
// waiting for one to become readable. /proc/<pid>/syscall names the call and its
// arguments; the descriptors they name are looked at in /proc/<pid>/fd (the device
// number of the terminal's slave), the sets select and poll wait on in
// /proc/<pid>/mem, those of an epoll instance in /proc/<pid>/fdinfo. Where the
// arguments cannot be read (a process that hides its memory), a process waiting in
// select, poll or epoll counts when its stdin is the terminal.

// sysKind is what a system call does, as far as waiting for input goes.
type sysKind uint8

const (
	sysOther  sysKind = iota
	sysRead           // read, readv, pread64, preadv, preadv2: the descriptor is arg 0
	sysSelect         // select, pselect6: nfds arg 0, readfds arg 1
	sysPoll           // poll, ppoll: fds arg 0, nfds arg 1
	sysEpoll          // epoll_wait, epoll_pwait, epoll_pwait2: the epoll descriptor arg 0
)

// syscallKinds are the calls of this architecture that matter here.
var syscallKinds = map[string]map[int]sysKind{
	"amd64": {0: sysRead, 19: sysRead, 17: sysRead, 295: sysRead, 327: sysRead,
		23: sysSelect, 270: sysSelect, 7: sysPoll, 271: sysPoll,
		232: sysEpoll, 281: sysEpoll, 441: sysEpoll},
	"arm64": {63: sysRead, 65: sysRead, 67: sysRead, 69: sysRead, 286: sysRead,
		72: sysSelect, 73: sysPoll, 22: sysEpoll, 441: sysEpoll},
}[runtime.GOARCH]

// waitingOn reports whether one of pids is blocked reading the terminal whose slave has
// device number rdev.
func waitingOn(rdev uint64, pids []int) bool {
	for _, pid := range pids {
		if blockedReading(pid, rdev) {
			return true
		}
	}
	return false
}

// blockedReading reports whether process pid is blocked reading the terminal rdev.
func blockedReading(pid int, rdev uint64) bool {
	nr, args, ok := blockedCall(pid)
	if !ok {
		return false
	}
	switch syscallKinds[nr] {
	case sysRead:
		return isTerminal(pid, int(args[0]), rdev)
	case sysSelect:
		fds, ok := selectReadFDs(pid, int(args[0]), args[1])
		return anyTerminal(pid, fds, ok, rdev)
	case sysPoll:
		fds, ok := pollReadFDs(pid, args[0], int(args[1]))
		return anyTerminal(pid, fds, ok, rdev)
	case sysEpoll:
		fds, ok := epollReadFDs(pid, int(args[0]))
		return anyTerminal(pid, fds, ok, rdev)
	}
	return false
}

// anyTerminal reports whether one of fds of pid is the terminal rdev; when the set
// could not be read (ok false), whether pid's stdin is.
func anyTerminal(pid int, fds []int, ok bool, rdev uint64) bool {
	if !ok {
		return isTerminal(pid, 0, rdev)
	}
	for _, fd := range fds {
		if isTerminal(pid, fd, rdev) {
			return true
		}
	}
	return false
}

// blockedCall reads the system call process pid is blocked in, with its first three
// arguments; false when it runs, is not in a call, or cannot be read.
func blockedCall(pid int) (nr int, args [3]uint64, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/syscall")
	if err != nil {
		return 0, args, false
	}
	f := strings.Fields(string(data))
	if len(f) < 4 {
		return 0, args, false // "running", or "-1 sp pc"
	}
	nr, err = strconv.Atoi(f[0])
	if err != nil || nr < 0 {
		return 0, args, false
	}
	for i := range args {
		v, err := strconv.ParseUint(strings.TrimPrefix(f[1+i], "0x"), 16, 64)
		if err != nil {
			return 0, args, false
		}
		args[i] = v
	}
	return nr, args, true
}

// isTerminal reports whether descriptor fd of process pid is the terminal whose slave
// has device number rdev.
func isTerminal(pid, fd int, rdev uint64) bool {
	if fd < 0 || fd > 1<<20 {
		return false
	}
	var st unix.Stat_t
	if unix.Stat("/proc/"+strconv.Itoa(pid)+"/fd/"+strconv.Itoa(fd), &st) != nil {
		return false
	}
	return st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == rdev
}

// Bounds of what is read of a process's memory: select's sets hold FD_SETSIZE bits,
// and a poll set is looked at up to maxPollFDs entries.
const (
	maxSelectFDs = 1024
	maxPollFDs   = 256
)

// selectReadFDs reads the read set (at address readfds, nfds bits) select waits on.
func selectReadFDs(pid, nfds int, readfds uint64) ([]int, bool) {
	if readfds == 0 {
		return nil, true
	}
	nfds = min(max(nfds, 0), maxSelectFDs)
	set, ok := readMem(pid, readfds, (nfds+63)/64*8)
	if !ok {
		return nil, false
	}
	var fds []int
	for fd := 0; fd < nfds; fd++ {
		if set[fd/8]&(1<<(fd%8)) != 0 {
			fds = append(fds, fd)
		}
	}
	return fds, true
}

// pollReadFDs reads the descriptors a poll set (at address ufds, nfds entries of struct
// pollfd) waits to become readable.
func pollReadFDs(pid int, ufds uint64, nfds int) ([]int, bool) {
	nfds = min(max(nfds, 0), maxPollFDs)
	data, ok := readMem(pid, ufds, nfds*8)
	if !ok {
		return nil, false
	}
	var fds []int
	for i := 0; i+8 <= len(data); i += 8 {
		fd := int(int32(binary.NativeEndian.Uint32(data[i:])))
		events := binary.NativeEndian.Uint16(data[i+4:])
		if events&(unix.POLLIN|pollRdNorm) != 0 {
			fds = append(fds, fd)
		}
	}
	return fds, true
}

// epollReadFDs reads the descriptors epoll instance epfd of pid waits to become
// readable, from its fdinfo ("tfd: <fd> events: <mask> …").
func epollReadFDs(pid, epfd int) ([]int, bool) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/fdinfo/" + strconv.Itoa(epfd))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	var fds []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || fields[0] != "tfd:" || fields[2] != "events:" {
			continue
		}
		fd, err1 := strconv.Atoi(fields[1])
		events, err2 := strconv.ParseUint(fields[3], 16, 32)
		if err1 == nil && err2 == nil && events&unix.EPOLLIN != 0 {
			fds = append(fds, fd)
		}
	}
	return fds, sc.Err() == nil
}

// readMem reads n bytes at addr of process pid's memory.
func readMem(pid int, addr uint64, n int) ([]byte, bool) {
	if n == 0 {
		return nil, true
	}
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mem")
	if err != nil {
		return nil, false
	}
	defer f.Close()
	buf := make([]byte, n)
	if addr > 1<<63 {
		return nil, false
	}
	m, err := f.ReadAt(buf, int64(addr))
	return buf, err == nil && m == n
}

// procStat is what /proc/<pid>/stat says about one process.
type procStat struct {
	pgrp  int
	state byte
}

// readStat reads /proc/<pid>/stat.
func readStat(pid int) (procStat, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	_, pgrp, state, ok := parseStat(data)
	return procStat{pgrp: pgrp, state: state}, ok
}

// cgroupProcs lists the processes of the cgroup at path.
func cgroupProcs(path string) ([]int, bool) {
	data, err := os.ReadFile(path + "/cgroup.procs")
	if err != nil {
		return nil, false
	}
	var pids []int
	for _, line := range bytes.Fields(data) {
		if pid, ok := atoi(line); ok {
			pids = append(pids, pid)
		}
	}
	return pids, true
}

// groupPids lists the live (non-zombie) members of process group pgrp, from a scan of
// /proc.
func groupPids(pgrp int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, ok := atoi([]byte(e.Name()))
		if !ok {
			continue
		}
		if st, ok := readStat(pid); ok && st.pgrp == pgrp && st.state != 'Z' && st.state != 'X' {
			out = append(out, pid)
		}
	}
	return out
}

// pollRdNorm is POLLRDNORM (asm-generic/poll.h), which x/sys does not name.
const pollRdNorm = 0x40
