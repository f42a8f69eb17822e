package bashsandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Other dsh processes of this user make their session directories and spill files in
// directories of their own choosing (their TMPDIR, their spill root), which a confined
// command of this process would see, read-only, and read. So every dsh records those
// directories in a registry every dsh of the user finds, whatever its environment —
// /tmp/dsh-instances-<uid>, a directory (0700, owned by the user) holding one record
// per live process — and each confined call of the namespace backend masks the
// directories the others recorded (otherInstanceMasks).
//
// A record is a file holding one absolute directory per line, locked (flock) by its
// process for as long as it lives: a record nobody holds a lock on belongs to a dead
// process and is removed by whoever finds it. It is made under a hidden name, locked,
// then renamed into place, so that no reader takes a record being made for a dead one.

// instancesDir is the registry of this user's dsh processes (a variable for tests).
var instancesDir = func() string { return "/tmp/dsh-instances-" + strconv.Itoa(os.Getuid()) }

// Prefixes of the directories a dsh makes in its temp dir and spill root.
const (
	sandboxDirPrefix = "dsh-sandbox-"
	spillDirPrefix   = "dsh-spill-"
)

// instance is this process's record.
var instance struct {
	mu     sync.Mutex
	file   *os.File // open, locked, while the process lives
	name   string
	dirs   []string
	warned bool
}

// registerDirs records dirs (made canonical) as directories this process makes private
// directories in, for other dsh processes to mask. A registry that cannot be used is
// logged once: other dsh processes' confined commands then see them.
func registerDirs(log *slog.Logger, dirs ...string) {
	instance.mu.Lock()
	defer instance.mu.Unlock()
	var add []string
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
		if canon, err := filepath.EvalSymlinks(d); err == nil {
			d = canon
		}
		if !slices.Contains(instance.dirs, d) && !slices.Contains(add, d) && !strings.ContainsRune(d, '\n') {
			add = append(add, d)
		}
	}
	if len(add) == 0 {
		return
	}
	err := writeRecord(add)
	if err == nil {
		instance.dirs = append(instance.dirs, add...)
		return
	}
	if !instance.warned {
		instance.warned = true
		log.Warn("bash-sandbox: cannot record this process's private directories for other dsh processes; their confined commands may read this process's session temp dirs and spill files", "err", err)
	}
}

// writeRecord appends dirs to this process's record, making it first (instance.mu
// held).
func writeRecord(dirs []string) error {
	if instance.file == nil {
		f, name, err := newRecord()
		if err != nil {
			return err
		}
		instance.file, instance.name = f, name
	}
	_, err := instance.file.WriteString(strings.Join(dirs, "\n") + "\n")
	return err
}

// newRecord makes this process's record, locked and in place.
func newRecord() (*os.File, string, error) {
	reg, err := openRegistry(true)
	if err != nil {
		return nil, "", err
	}
	defer reg.Close()
	suffix := make([]byte, 8)
	if _, err := rand.Read(suffix); err != nil {
		return nil, "", err
	}
	name := strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(suffix)
	dfd := int(reg.Fd())
	fd, err := syscall.Openat(dfd, "."+name, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_APPEND|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("record: %w", err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(instancesDir(), name))
	err = syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		err = syscall.Renameat(dfd, "."+name, dfd, name)
	}
	if err != nil {
		syscall.Unlinkat(dfd, "."+name)
		f.Close()
		return nil, "", fmt.Errorf("record: %w", err)
	}
	return f, name, nil
}

// openRegistry opens the registry directory, making it when create says so; it must be
// a directory of this user's that no one else may write.
func openRegistry(create bool) (*os.File, error) {
	dir := instancesDir()
	if create {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), dir)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, err
	}
	if int(st.Uid) != os.Getuid() || st.Mode&0o077 != 0 {
		f.Close()
		return nil, fmt.Errorf("%s is not a private directory of this user (owner %d, mode %o)", dir, st.Uid, st.Mode&0o777)
	}
	return f, nil
}

// registryUsable reports whether the registry can be used (made, if it is missing): a
// private directory of this user.
func registryUsable() bool {
	reg, err := openRegistry(true)
	if err == nil {
		reg.Close()
	}
	return err == nil
}

// otherInstanceDirs are the directories other live dsh processes recorded. Records of
// dead processes are removed.
func otherInstanceDirs() []string {
	reg, err := openRegistry(false)
	if err != nil {
		return nil
	}
	defer reg.Close()
	names, _ := reg.Readdirnames(-1)
	instance.mu.Lock()
	own := instance.name
	instance.mu.Unlock()
	var out []string
	for _, name := range names {
		if name == own || strings.HasPrefix(name, ".") {
			continue
		}
		for _, d := range readRecord(int(reg.Fd()), name) {
			if !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	return out
}

// readRecord returns the directories of the record name in the registry dfd, if its
// process lives; a dead process's record is removed.
func readRecord(dfd int, name string) []string {
	fd, err := syscall.Openat(dfd, name, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil
	}
	if syscall.Flock(fd, syscall.LOCK_SH|syscall.LOCK_NB) == nil {
		syscall.Unlinkat(dfd, name) // nobody holds it: its process is gone
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(f, 64<<10))
	var out []string
	lines := strings.Split(string(b), "\n")
	for _, line := range lines[:len(lines)-1] { // the last is empty or being written
		if filepath.IsAbs(line) {
			out = append(out, filepath.Clean(line))
		}
	}
	return out
}

// otherInstanceMasks are the directories of other dsh processes that a confined command
// of a call with the writable roots writable could see, to be masked (namespace
// backend): each directory they recorded — unless it holds a writable root or one of
// own, the directories this call masks already (or is /), then each of their
// directories in it (named dsh-sandbox-… or dsh-spill-…), as found now. Parents come
// before what they hold.
func otherInstanceMasks(writable, own []string) []string {
	var out []string
	add := func(p string) {
		if !slices.Contains(out, p) && !slices.Contains(own, p) && visibleInSandbox(p, writable) {
			out = append(out, p)
		}
	}
	holdsRoot := func(p string) bool {
		holds := func(w string) bool { return w != "" && within(w, p) }
		return slices.ContainsFunc(writable, holds) || slices.ContainsFunc(own, holds)
	}
	for _, d := range otherInstanceDirs() {
		canon, err := filepath.EvalSymlinks(d)
		if err != nil {
			continue // gone: nothing to see
		}
		if !holdsRoot(canon) {
			add(canon)
			continue
		}
		entries, _ := os.ReadDir(canon)
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() && (strings.HasPrefix(name, sandboxDirPrefix) || strings.HasPrefix(name, spillDirPrefix)) {
				if p := filepath.Join(canon, name); !holdsRoot(p) {
					add(p)
				}
			}
		}
	}
	slices.SortStableFunc(out, func(a, b string) int { return len(a) - len(b) })
	return out
}
