package proc_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/proc"
)

// spillCapture keeps a 1000-byte tail and spills up to 1 MiB.
var spillCapture = proc.Capture{MaxBytes: 1000, SpillMaxBytes: 1 << 20}

func newSpool(t *testing.T, budget int64) (*proc.Spool, *proctest.Buffer) {
	t.Helper()
	logs := &proctest.Buffer{}
	sp := proc.NewSpool(proc.SpoolOptions{Root: t.TempDir(), BudgetBytes: budget, Logger: logs.Logger()})
	t.Cleanup(sp.Close)
	return sp, logs
}

// streamOf writes n bytes of data (cycling through "0123456789") into a new stream of
// owner, in writes of at most chunk bytes.
func streamOf(t *testing.T, sp *proc.Spool, owner string, n, chunk int) (*proc.Stream, []byte) {
	t.Helper()
	data := bytes.Repeat([]byte("0123456789"), n/10+1)[:n]
	s := sp.NewStream(owner, spillCapture)
	for rest := data; len(rest) > 0; {
		k := min(chunk, len(rest))
		if n, err := s.Write(rest[:k]); n != k || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
		rest = rest[k:]
	}
	return s, data
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

// A Spool stream is an io.Writer with the capture rules of a process's stream: the tail
// in memory, the whole stream in a 0600 file of the owner's 0700 directory of the
// spool's 0700 directory; EndOwner and Close withdraw and remove what they end.
func TestSpoolStream(t *testing.T) {
	sp, _ := newSpool(t, 1<<20)
	if sp.Dir() != "" || sp.Budget() != 1<<20 || sp.Root() == "" {
		t.Fatalf("new spool: dir %q budget %d root %q", sp.Dir(), sp.Budget(), sp.Root())
	}
	s := sp.NewStream("sess-1", proc.Capture{MaxBytes: 10, SpillMaxBytes: 1 << 20})
	want := proctest.SeqOutput(3000)
	if n, err := io.Copy(s, strings.NewReader(want)); err != nil || n != int64(len(want)) {
		t.Fatalf("io.Copy = %d, %v", n, err)
	}
	out := s.Output()
	if out.Text != want[len(want)-10:] || !out.Truncated || out.Bytes != int64(len(want)) || s.Len() != int64(len(want)) {
		t.Errorf("output %+v", out)
	}
	dir := sp.Dir()
	if wantPath := filepath.Join(dir, "s-sess-1", "1.log"); out.SpillPath != wantPath || s.SpillPath() != wantPath {
		t.Fatalf("spill path %q, want %q", out.SpillPath, wantPath)
	}
	if filepath.Dir(dir) != sp.Root() || !strings.HasPrefix(filepath.Base(dir), "dsh-spill-") || mode(t, dir) != fs.ModeDir|0o700 ||
		mode(t, filepath.Dir(out.SpillPath)) != fs.ModeDir|0o700 || mode(t, out.SpillPath) != 0o600 {
		t.Errorf("modes: %v %v %v", mode(t, dir), mode(t, filepath.Dir(out.SpillPath)), mode(t, out.SpillPath))
	}
	s.Close()
	s.Close() // idempotent
	if n, err := s.Write([]byte("late")); n != 4 || err != nil || s.Len() != int64(len(want)) {
		t.Errorf("a write after Close: %d, %v, length %d", n, err, s.Len())
	}
	if data, err := os.ReadFile(out.SpillPath); err != nil || string(data) != want {
		t.Fatalf("spill file after Close: %d bytes, %v", len(data), err)
	}
	if c := s.Since(0); !c.Lossy || string(c.Data) != want[len(want)-10:] {
		t.Errorf("Since(0) = %+v", c)
	}
	if used := sp.Used(); used != int64(len(want)) {
		t.Errorf("Used %d, want %d", used, len(want))
	}

	// Another owner's file survives the end of the first.
	other, otherData := streamOf(t, sp, "", 5000, 700)
	other.Close()
	sp.EndOwner("sess-1")
	sp.EndOwner("nobody") // unknown owners are ignored
	if s.SpillPath() != "" || s.Output().SpillPath != "" {
		t.Errorf("the ended owner's path is still reported: %q", s.SpillPath())
	}
	if _, err := os.Lstat(filepath.Join(dir, "s-sess-1")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the ended owner's directory: %v", err)
	}
	otherPath := other.SpillPath()
	if filepath.Dir(otherPath) != filepath.Join(dir, "no-session") {
		t.Errorf("owner \"\" spills to %s", otherPath)
	}
	if data, err := os.ReadFile(otherPath); err != nil || !bytes.Equal(data, otherData) || sp.Used() != 5000 {
		t.Errorf("the other owner's file: %d bytes, %v; used %d", len(data), err, sp.Used())
	}
	sp.Close()
	if other.SpillPath() != "" || sp.Used() != 0 {
		t.Errorf("after Close: path %q, used %d", other.SpillPath(), sp.Used())
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("spill dir after Close: %v", err)
	}
	late := sp.NewStream("x", spillCapture)
	late.Write(make([]byte, 5000))
	if late.SpillPath() != "" || late.Len() != 5000 || len(late.Output().Text) != 1000 {
		t.Errorf("a stream of a closed spool: %+v", late.Output().SpillPath)
	}
	late.Close()
}

// Owner names become directory names without ever naming anything outside the spool.
func TestSpoolOwnerDirectoryNames(t *testing.T) {
	sp, _ := newSpool(t, 1<<20)
	for owner, want := range map[string]string{
		"":                                   "no-session",
		"Ab_9-x":                             "s-Ab_9-x",
		"../../etc":                          "h-",
		"a/b":                                "h-",
		".":                                  "h-",
		strings.Repeat("x", 65):              "h-",
		"sess\x00ion":                        "h-",
		"0123456789abcdef0123456789abcdef01": "s-0123456789abcdef0123456789abcdef01",
	} {
		s, _ := streamOf(t, sp, owner, 2000, 2000)
		path := s.SpillPath()
		got := filepath.Base(filepath.Dir(path))
		if filepath.Dir(filepath.Dir(path)) != sp.Dir() || !strings.HasPrefix(got, want) || (want == "h-" && len(got) != 34) {
			t.Errorf("owner %q spills to %s; want a directory %s… of %s", owner, path, want, sp.Dir())
		}
		s.Close()
	}
}

// Attack: the spill directory is moved away and replaced by a symlink to a directory
// the attacker picked. The spool never writes there: the next stream keeps its tail
// only (no path: rendered "(unavailable)"), and the warning says why.
func TestSpoolRefusesASwappedSpillDirectory(t *testing.T) {
	sp, logs := newSpool(t, 1<<20)
	first, _ := streamOf(t, sp, "s1", 2000, 2000)
	first.Close()
	dir := sp.Dir()
	target := t.TempDir()
	if err := os.Rename(dir, dir+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, dir); err != nil {
		t.Fatal(err)
	}
	for _, owner := range []string{"s1", "s2"} {
		s, _ := streamOf(t, sp, owner, 5000, 5000)
		if out := s.Output(); out.SpillPath != "" || !out.Truncated || len(out.Text) != 1000 || out.Bytes != 5000 {
			t.Errorf("owner %s after the swap: spill %q truncated %v", owner, out.SpillPath, out.Truncated)
		}
		s.Close()
	}
	if entries, _ := os.ReadDir(target); len(entries) != 0 {
		t.Errorf("the spool wrote through the symlink: %v", entries)
	}
	if moved := proctest.SpillFiles(t, dir+".moved"); len(moved) != 1 {
		t.Errorf("the moved directory holds %q; want only the first file", moved)
	}
	if !strings.Contains(logs.String(), "the spill directory was moved or replaced") {
		t.Errorf("no warning; logs:\n%s", logs)
	}
	if sp.Used() != 2000 {
		t.Errorf("Used %d, want 2000 (the first file only)", sp.Used())
	}
	sp.Close()
	os.Remove(dir)
	os.RemoveAll(dir + ".moved")
}

// Attack: an owner directory is replaced by a symlink, both while the owner has files
// (the spool holds the directory open) and before its first spill (a planted link).
func TestSpoolRefusesASwappedOwnerDirectory(t *testing.T) {
	sp, logs := newSpool(t, 1<<20)
	first, _ := streamOf(t, sp, "held", 2000, 2000)
	first.Close()
	ownerDir := filepath.Dir(first.SpillPath())
	target := t.TempDir()
	if err := os.Rename(ownerDir, ownerDir+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, ownerDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(sp.Dir(), "s-planted")); err != nil {
		t.Fatal(err)
	}
	for _, owner := range []string{"held", "planted"} {
		s, _ := streamOf(t, sp, owner, 5000, 5000)
		if out := s.Output(); out.SpillPath != "" || len(out.Text) != 1000 {
			t.Errorf("owner %s: spill %q; want none", owner, out.SpillPath)
		}
		s.Close()
	}
	if entries, _ := os.ReadDir(target); len(entries) != 0 {
		t.Errorf("the spool wrote through a symlink: %v", entries)
	}
	if got := logs.String(); !strings.Contains(got, "a spill directory was moved or replaced") || !strings.Contains(got, "s-planted: ENOTDIR") {
		t.Errorf("warnings:\n%s", got)
	}
	// Other owners still spill.
	s, data := streamOf(t, sp, "fine", 5000, 5000)
	if got, err := os.ReadFile(s.SpillPath()); err != nil || !bytes.Equal(got, data) {
		t.Errorf("an untouched owner: %v", err)
	}
	s.Close()
}

// Attack: a symlink planted at the name of the next spill file. The file is created
// exclusively, so the link (and the file it points at) is left alone.
func TestSpoolRefusesAPlantedFileName(t *testing.T) {
	sp, _ := newSpool(t, 1<<20)
	first, _ := streamOf(t, sp, "f", 2000, 2000) // 1.log
	first.Close()
	victim := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(filepath.Dir(first.SpillPath()), "2.log")); err != nil {
		t.Fatal(err)
	}
	s, _ := streamOf(t, sp, "f", 5000, 5000) // 2.log
	if s.SpillPath() != "" || len(s.Output().Text) != 1000 {
		t.Errorf("spill %q; want none", s.SpillPath())
	}
	s.Close()
	if data, _ := os.ReadFile(victim); string(data) != "precious" {
		t.Errorf("the link's target was written: %q", data)
	}
	if next, _ := streamOf(t, sp, "f", 5000, 5000); next.SpillPath() == "" { // 3.log
		t.Error("the owner cannot spill any more")
	} else {
		next.Close()
	}
}

// Another user cannot read or list an owner's spill files (the directories are 0700,
// the files 0600). A process of the same user can, where nothing else hides them: that
// is for the sandbox (its mount namespace shows confined commands no spill root).
func TestSpoolFilesArePrivateToTheUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a reader as another user")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("no setpriv(1)")
	}
	sp, _ := newSpool(t, 1<<20)
	if err := os.Chmod(filepath.Dir(sp.Dir()), 0o755); err != nil { // t.TempDir is 0700 itself
		t.Fatal(err)
	}
	s, _ := streamOf(t, sp, "a", 5000, 5000)
	defer s.Close()
	for _, args := range [][]string{{"cat", s.SpillPath()}, {"ls", filepath.Dir(s.SpillPath())}, {"ls", sp.Dir()}} {
		cmd := exec.Command(setpriv, append([]string{"--reuid=65534", "--regid=65534", "--clear-groups"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Permission denied") {
			t.Errorf("%v as uid 65534: %v, %s", args, err, out)
		}
	}
}

// Eviction under the budget takes the writing owner's own finished files first, then
// other owners' finished files, oldest first, and never the file of a stream that is
// still open: a stream that cannot make room loses its own spill instead.
func TestSpoolEvictionIsFairToOwners(t *testing.T) {
	sp, _ := newSpool(t, 300_000)
	closed := func(owner string, n int) *proc.Stream {
		t.Helper()
		s, _ := streamOf(t, sp, owner, n, n)
		if s.SpillPath() == "" {
			t.Fatalf("owner %s: %d bytes did not spill", owner, n)
		}
		s.Close()
		return s
	}
	kept := func(name string, s *proc.Stream) {
		t.Helper()
		if fi, err := os.Stat(s.SpillPath()); s.SpillPath() == "" || err != nil || fi.Size() != s.Len() {
			t.Errorf("%s: spill %q (%v); want it kept", name, s.SpillPath(), err)
		}
	}
	evicted := func(name string, s *proc.Stream, path string) {
		t.Helper()
		if _, err := os.Stat(path); s.SpillPath() != "" || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: spill %q (file: %v); want it evicted", name, s.SpillPath(), err)
		}
	}
	a1, a2, b1 := closed("A", 100_000), closed("A", 100_000), closed("B", 100_000)
	a1Path, a2Path, b1Path := a1.SpillPath(), a2.SpillPath(), b1.SpillPath()

	b2 := closed("B", 100_000) // B's own b1 goes, although A's a1 is older
	evicted("b1", b1, b1Path)
	kept("a1", a1)
	kept("a2", a2)
	b2Path := b2.SpillPath()

	c1 := closed("C", 100_000) // C has nothing finished: the oldest other file, a1, goes
	evicted("a1", a1, a1Path)
	kept("a2", a2)
	kept("b2", b2)
	c1Path := c1.SpillPath()

	ar, _ := streamOf(t, sp, "A", 100_000, 100_000) // still open: A's own a2 goes
	evicted("a2", a2, a2Path)
	kept("b2", b2)
	kept("c1", c1)
	kept("ar (open)", ar)

	br, _ := streamOf(t, sp, "B", 200_000, 100_000) // open: b2 (own), then c1 (other's, finished)
	evicted("b2", b2, b2Path)
	evicted("c1", c1, c1Path)
	kept("ar (open)", ar)
	kept("br (open)", br)
	if sp.Used() != 300_000 {
		t.Errorf("Used %d", sp.Used())
	}

	brPath := br.SpillPath()
	br.Write([]byte("x")) // nothing finished is left, and A's open file is not B's to take
	evicted("br", br, brPath)
	kept("ar (open)", ar)
	if out := br.Output(); out.Bytes != 200_001 || len(out.Text) != 1000 || !out.Truncated {
		t.Errorf("br keeps its tail: %+v", out.Bytes)
	}
	ar.Close()
	br.Close()
	kept("ar (closed)", ar)
	if files := proctest.SpillFiles(t, sp.Dir()); len(files) != 1 || files[0] != ar.SpillPath() || sp.Used() != 100_000 {
		t.Errorf("spill dir holds %q, used %d", files, sp.Used())
	}
}

// An owner that ends with a stream still open: its finished files go at once, the
// open stream's file when it closes, and then its directory.
func TestSpoolEndOwnerWithAnOpenStream(t *testing.T) {
	sp, _ := newSpool(t, 1<<20)
	done, _ := streamOf(t, sp, "s", 5000, 5000)
	done.Close()
	donePath := done.SpillPath()
	open, _ := streamOf(t, sp, "s", 5000, 5000)
	openPath := open.SpillPath()
	sp.EndOwner("s")
	if _, err := os.Stat(donePath); done.SpillPath() != "" || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("finished file after EndOwner: %q %v", done.SpillPath(), err)
	}
	open.Write(make([]byte, 100))
	if open.SpillPath() != openPath {
		t.Errorf("the open stream lost its file: %q", open.SpillPath())
	}
	open.Close()
	if _, err := os.Stat(filepath.Dir(openPath)); open.SpillPath() != "" || !errors.Is(err, fs.ErrNotExist) || sp.Used() != 0 {
		t.Errorf("after the last stream closed: path %q, dir %v, used %d", open.SpillPath(), err, sp.Used())
	}
	// The owner may start again.
	again, _ := streamOf(t, sp, "s", 5000, 5000)
	if again.SpillPath() == "" {
		t.Error("a new stream of the ended owner does not spill")
	}
	again.Close()
}

// Concurrent writers of different owners share the budget without ever passing it.
func TestSpoolConcurrentWriters(t *testing.T) {
	sp, _ := newSpool(t, 250_000)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				s := sp.NewStream(string(rune('a'+i%3)), spillCapture)
				for range 20 {
					s.Write(make([]byte, 2000+i*100))
					if used := sp.Used(); used > 250_000 {
						t.Errorf("Used %d over the budget", used)
					}
				}
				s.Close()
			}
		}()
	}
	wg.Wait()
	if used, disk := sp.Used(), proctest.DiskUsage(t, sp.Dir()); used != disk {
		t.Errorf("Used %d, on disk %d", used, disk)
	}
}

func TestSpoolDefaults(t *testing.T) {
	sp := proc.NewSpool(proc.SpoolOptions{})
	defer sp.Close()
	if sp.Root() != os.TempDir() || sp.Budget() != proc.DefaultSpillBudgetBytes || sp.Used() != 0 || sp.Dir() != "" {
		t.Errorf("defaults: root %q budget %d used %d dir %q", sp.Root(), sp.Budget(), sp.Used(), sp.Dir())
	}
	s := sp.NewStream("", proc.Capture{MaxBytes: -5, SpillMaxBytes: -1}) // negative limits count as 0
	s.Write([]byte("abc"))
	if out := s.Output(); out.Text != "" || !out.Truncated || out.Bytes != 3 || out.SpillPath != "" {
		t.Errorf("a stream keeping nothing: %+v", out)
	}
	s.Close()
}

// OwnerDir makes an owner's directory before its first spill — the directory every one
// of its spill paths lies in — and keeps it, even empty, until EndOwner: a sandbox that
// shows it to the owner's commands shows their later spill files too.
func TestSpoolOwnerDirKeptUntilEndOwner(t *testing.T) {
	sp, _ := newSpool(t, 6000)
	f, err := sp.OwnerDir("kept")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	path := f.Name()
	if path != filepath.Join(sp.Dir(), "s-kept") || mode(t, path) != fs.ModeDir|0o700 {
		t.Fatalf("owner dir %q (spill dir %q), mode %v", path, sp.Dir(), mode(t, path))
	}
	same := func() bool {
		a, err1 := f.Stat()
		b, err2 := os.Lstat(path)
		return err1 == nil && err2 == nil && os.SameFile(a, b)
	}
	if !same() {
		t.Fatal("the returned directory is not the one at its path")
	}
	s, data := streamOf(t, sp, "kept", 5000, 5000)
	if filepath.Dir(s.SpillPath()) != path {
		t.Fatalf("spill path %q is not in %q", s.SpillPath(), path)
	}
	if got, err := os.ReadFile(s.SpillPath()); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("spill file: %v", err)
	}
	s.Close()
	// Another owner's output evicts the file: the directory stays, the same one.
	other, _ := streamOf(t, sp, "other", 5000, 5000)
	other.Close()
	if s.SpillPath() != "" {
		t.Fatalf("the evicted file is still reported: %q", s.SpillPath())
	}
	if entries, err := os.ReadDir(path); err != nil || len(entries) != 0 || !same() {
		t.Fatalf("the kept directory after its last file went: %v %v", entries, err)
	}
	again, err := sp.OwnerDir("kept")
	if err != nil || again.Name() != path {
		t.Fatalf("OwnerDir again: %v %v", again, err)
	}
	again.Close()
	sp.EndOwner("kept")
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the owner dir after EndOwner: %v", err)
	}
	sp.Close()
	if _, err := sp.OwnerDir("late"); err == nil {
		t.Fatal("OwnerDir of a closed spool succeeded")
	}
}

// OwnerDir makes its directory as a spill would: a symlink planted at its name is
// refused, never followed.
func TestSpoolOwnerDirRefusesAPlantedLink(t *testing.T) {
	sp, _ := newSpool(t, 1<<20)
	first, err := sp.OwnerDir("first")
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	target := t.TempDir()
	if err := os.Symlink(target, filepath.Join(sp.Dir(), "s-planted")); err != nil {
		t.Fatal(err)
	}
	if f, err := sp.OwnerDir("planted"); err == nil || !strings.Contains(err.Error(), "s-planted: ENOTDIR") {
		t.Fatalf("OwnerDir through a planted link: %v, %v", f, err)
	}
	if entries, _ := os.ReadDir(target); len(entries) != 0 {
		t.Errorf("wrote through the link: %v", entries)
	}
}
