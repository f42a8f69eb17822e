package proc_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Keep takes an owner's complete spill files out of the spool, by move or (across file
// systems) by copy: the kept file holds the whole stream, the spool no longer reports
// or counts it, and nothing of another owner or of a stream still open is touched.
func TestSpoolKeep(t *testing.T) {
	for name, dir := range map[string]func(t *testing.T) string{
		"same file system":  func(t *testing.T) string { return filepath.Join(t.TempDir(), "kept") },
		"other file system": shmDir,
	} {
		t.Run(name, func(t *testing.T) {
			sp, _ := newSpool(t, 1<<20)
			done, data := streamOf(t, sp, "s1", 3000, 100)
			done.Close()
			open, _ := streamOf(t, sp, "s1", 3000, 100)
			defer open.Close()
			other, _ := streamOf(t, sp, "s2", 3000, 100)
			other.Close()
			from, openPath, otherPath := done.SpillPath(), open.SpillPath(), other.SpillPath()
			used := sp.Used()

			dst := dir(t)
			kept := sp.Keep("s1", dst, func(name string) string { return "kept-" + name })
			if len(kept) != 1 || kept[0].From != from || kept[0].To != filepath.Join(dst, "kept-"+filepath.Base(from)) {
				t.Fatalf("Keep = %+v (spill file %s)", kept, from)
			}
			if got, err := os.ReadFile(kept[0].To); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("the kept file: %d bytes, %v (want %d)", len(got), err, len(data))
			}
			if st, err := os.Stat(kept[0].To); err != nil || st.Mode().Perm() != 0o600 {
				t.Errorf("the kept file's mode: %v, %v", st, err)
			}
			if _, err := os.Lstat(from); !os.IsNotExist(err) {
				t.Errorf("the spool's copy is still there: %v", err)
			}
			if done.SpillPath() != "" || sp.Used() != used-int64(len(data)) {
				t.Errorf("after Keep: spill path %q, used %d (was %d)", done.SpillPath(), sp.Used(), used)
			}
			if open.SpillPath() != openPath || other.SpillPath() != otherPath {
				t.Errorf("other files changed: %q, %q", open.SpillPath(), other.SpillPath())
			}
			if again := sp.Keep("s1", dst, func(name string) string { return "again-" + name }); len(again) != 0 {
				t.Errorf("a second Keep = %+v", again)
			}
		})
	}
}

// shmDir is a directory on another file system than the test's temp dir (/dev/shm).
func shmDir(t *testing.T) string {
	dir, err := os.MkdirTemp("/dev/shm", "dsh-keep-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "kept")
}
