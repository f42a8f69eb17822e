package proc

import (
	"errors"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// RemoveDeadInstances calls remove for every entry of the directory parentFD named
// <prefix><pid>-<suffix> whose process is dead: no process holds its lock (flock) and
// no process has its pid. Both must hold: the lock protects a live instance in another
// pid namespace, the pid an instance of an older dsh that took no lock. An instance
// directory is one a dsh process made for itself and holds locked while it lives (a
// spill directory, the Supervisor's cgroup directory).
func RemoveDeadInstances(parentFD int, prefix string, remove func(name string)) {
	entries, err := readDirNames(parentFD)
	if err != nil {
		return
	}
	for _, name := range entries {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
			continue
		}
		if instanceLocked(parentFD, name) {
			continue
		}
		remove(name)
	}
}

// instanceLocked reports whether a live process holds the lock of directory name (or
// it cannot be told: not a directory of this user, unreadable).
func instanceLocked(parentFD int, name string) bool {
	fd, err := unix.Openat(parentFD, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return true
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || int(st.Uid) != os.Geteuid() {
		return true
	}
	return unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil
}

// readDirNames lists the entries of the open directory fd (which it does not close).
func readDirNames(fd int) ([]string, error) {
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	unix.CloseOnExec(dup)
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	if _, err := unix.Seek(dup, 0, 0); err != nil {
		return nil, err
	}
	return f.Readdirnames(-1)
}
