package proc_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/internal/proctest"
)

// locked reports whether another holder has the instance lock of dir.
func locked(t *testing.T, dir string) bool {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	return errors.Is(unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK)
}

// A temp cleaner deletes the spill directory with everything in it, while one stream
// still spills: the next spill makes a new private directory (another name, 0700, the
// instance lock) and spills there; the deleted files' paths are withdrawn and leave
// the budget, and Generation changes.
func TestSpoolRecreatesADeletedSpillDirectory(t *testing.T) {
	sp, logs := newSpool(t, 1<<20)
	closed, _ := streamOf(t, sp, "s1", 2000, 2000)
	closed.Close()
	open, _ := streamOf(t, sp, "s2", 3000, 3000)
	old, gen := sp.Dir(), sp.Generation()
	if err := os.RemoveAll(old); err != nil {
		t.Fatal(err)
	}

	s, data := streamOf(t, sp, "s1", 5000, 5000)
	path := s.SpillPath()
	dir := sp.Dir()
	if path == "" || dir == old || filepath.Dir(filepath.Dir(path)) != dir || !strings.HasPrefix(filepath.Base(dir), "dsh-spill-") {
		t.Fatalf("after the deletion: spill %q in %q (the old directory %q)", path, dir, old)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the new spill file: %v", err)
	}
	if mode(t, dir) != fs.ModeDir|0o700 || mode(t, filepath.Dir(path)) != fs.ModeDir|0o700 || mode(t, path) != 0o600 {
		t.Errorf("modes %v %v %v", mode(t, dir), mode(t, filepath.Dir(path)), mode(t, path))
	}
	if !locked(t, dir) {
		t.Error("the new spill directory does not hold the instance lock")
	}
	if sp.Generation() != gen+1 {
		t.Errorf("Generation %d, want %d", sp.Generation(), gen+1)
	}
	if closed.SpillPath() != "" || open.SpillPath() != "" {
		t.Errorf("deleted files still reported: %q %q", closed.SpillPath(), open.SpillPath())
	}
	if _, err := os.Lstat(old); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the old path was made again: %v", err)
	}
	// The stream that was open keeps its tail and no longer spills; its bytes leave the
	// budget once its writer notices.
	open.Write([]byte("more"))
	if out := open.Output(); out.SpillPath != "" || !out.Truncated || out.Bytes != 3004 {
		t.Errorf("the open stream after the deletion: %+v", out.SpillPath)
	}
	open.Close()
	if sp.Used() != 5000 {
		t.Errorf("Used %d, want 5000 (the new file only)", sp.Used())
	}
	if !strings.Contains(logs.String(), `msg="subprocess: the spill directory was deleted; making a new one" path=`+old) {
		t.Errorf("no warning; logs:\n%s", logs)
	}
	s.Close()
	sp.EndOwner("s1")
	if sp.Used() != 0 {
		t.Errorf("Used %d after EndOwner, want 0", sp.Used())
	}
	sp.Close()
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Close left the new directory: %v", err)
	}
}

// An owner's directory kept by OwnerDir is deleted: the next spill makes it again at
// the same path, Generation changes, and OwnerDir returns the new one. Other owners'
// files are untouched.
func TestSpoolRecreatesADeletedOwnerDirectory(t *testing.T) {
	sp, _ := newSpool(t, 1<<20)
	f, err := sp.OwnerDir("kept")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	other, otherData := streamOf(t, sp, "other", 2000, 2000)
	other.Close()
	gen := sp.Generation()
	if err := os.RemoveAll(f.Name()); err != nil {
		t.Fatal(err)
	}
	s, data := streamOf(t, sp, "kept", 5000, 5000)
	if filepath.Dir(s.SpillPath()) != f.Name() {
		t.Fatalf("spill %q, want it in %q", s.SpillPath(), f.Name())
	}
	if got, err := os.ReadFile(s.SpillPath()); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the spill file: %v", err)
	}
	if sp.Generation() == gen {
		t.Error("Generation did not change")
	}
	again, err := sp.OwnerDir("kept")
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	a, _ := again.Stat()
	b, _ := os.Lstat(f.Name())
	if again.Name() != f.Name() || !os.SameFile(a, b) {
		t.Errorf("OwnerDir after the recreation: %q", again.Name())
	}
	if got, err := os.ReadFile(other.SpillPath()); err != nil || !bytes.Equal(got, otherData) {
		t.Errorf("another owner's file: %v", err)
	}
	s.Close()
}

// What takes the place of a deleted spill directory is never followed: a symlink, or
// a directory of another user, is refused for good — later spills keep their tails
// only, and no directory is made instead.
func TestSpoolRefusesWhatReplacedADeletedSpillDirectory(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, dir, target string)
	}{
		{"symlink", func(t *testing.T, dir, target string) {
			if err := os.Symlink(target, dir); err != nil {
				t.Fatal(err)
			}
		}},
		{"another user's directory", func(t *testing.T, dir, _ string) {
			if os.Geteuid() != 0 {
				t.Skip("needs root to make a directory of another user")
			}
			if err := os.Mkdir(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, logs := newSpool(t, 1<<20)
			first, _ := streamOf(t, sp, "s1", 2000, 2000)
			first.Close()
			dir := sp.Dir()
			root := filepath.Dir(dir)
			target := t.TempDir()
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			tc.plant(t, dir, target)
			for range 2 {
				s, _ := streamOf(t, sp, "s1", 5000, 5000)
				if out := s.Output(); out.SpillPath != "" || len(out.Text) != 1000 {
					t.Errorf("spill %q; want none", out.SpillPath)
				}
				s.Close()
			}
			if entries, _ := os.ReadDir(target); len(entries) != 0 {
				t.Errorf("wrote through the symlink: %v", entries)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("wrote into the planted directory: %v", entries)
			}
			if entries, _ := os.ReadDir(root); len(entries) != 1 {
				t.Errorf("the root holds %v; want only what was planted", entries)
			}
			if !strings.Contains(logs.String(), "the spill directory was moved or replaced") {
				t.Errorf("no warning; logs:\n%s", logs)
			}
			sp.Close()
			os.Remove(dir)
		})
	}
}

// Deletions in a row, each followed by a spill, leave no descriptor behind.
func TestSpoolRecreationKeepsNoDescriptor(t *testing.T) {
	sp, _ := newSpool(t, 1<<20)
	s, _ := streamOf(t, sp, "s1", 5000, 5000)
	s.Close()
	// A new spill directory's sweep of dead instances' ones runs in the background,
	// holding the root open for a moment.
	swept := func() bool {
		for _, target := range proctest.FDs(t) {
			if target == sp.Root() {
				return false
			}
		}
		return true
	}
	proctest.WaitFor(t, 5*time.Second, "the sweep of dead instances' directories", swept)
	before := proctest.FDs(t)
	for range 20 {
		if err := os.RemoveAll(sp.Dir()); err != nil {
			t.Fatal(err)
		}
		s, _ := streamOf(t, sp, "s1", 5000, 5000)
		if s.SpillPath() == "" {
			t.Fatal("no spill after a deletion")
		}
		s.Close()
	}
	// The spool holds the same two descriptors (its directory and the owner's), now on
	// the newest directories.
	if !proctest.Until(5*time.Second, func() bool { return swept() && len(proctest.FDs(t)) == len(before) }) {
		t.Errorf("descriptors %v → %v after 20 recreations", before, proctest.FDs(t))
	}
}
