package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// spillFDs lists, sorted, what process pid's descriptors under root refer to (a
// deleted file or directory reads "<path> (deleted)").
func spillFDs(t *testing.T, pid int, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	var held []string
	for _, e := range entries {
		target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		if strings.HasPrefix(target, root+"/") {
			held = append(held, target)
		}
	}
	slices.Sort(held)
	return held
}

// A temp cleaner deletes dsh's spill directory: the next long output spills again, to
// a new private directory, and a confined command reads it at the path its result
// names; dsh holds nothing of the deleted directory. A symlink put where the new
// directory was is refused: later results say "(unavailable)" and nothing is written
// through it.
func TestServeSpillsAgainAfterTheSpillDirectoryIsDeleted(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the spill root: this test's own
	c := startServe(t, clientOptions{}, "--profile", "sandbox", "--workspace", t.TempDir())
	bash := func(command string) string {
		t.Helper()
		text, _, _ := c.call(t, "bash", map[string]any{"command": command, "description": "Spill and read"})
		return text
	}
	first := spillOf(t, bash("seq 1 30000"))
	dir := filepath.Dir(filepath.Dir(first))
	if filepath.Dir(dir) != tmp {
		t.Fatalf("spill file %s is not under the test's spill root %s", first, tmp)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}

	second := spillOf(t, bash("seq 1 30000"))
	again := filepath.Dir(filepath.Dir(second))
	if again == dir || filepath.Dir(again) != tmp || !strings.HasPrefix(filepath.Base(again), "dsh-spill-") {
		t.Fatalf("after the deletion the spill file is %s (the deleted directory %s)", second, dir)
	}
	if fi, err := os.Stat(again); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the new spill directory: %v %v", fi, err)
	}
	if got := bash("wc -l " + second); got != "30000 "+second+"\n" {
		t.Fatalf("a confined wc -l of the new spill file: %q", got)
	}
	if got := bash("seq 1 30000 | cmp - " + second + " && echo same"); got != "same\n" {
		t.Fatalf("the new spill file's content: %q", got)
	}
	// dsh holds the new directories, and nothing of the deleted ones.
	if got, want := spillFDs(t, c.cmd.Process.Pid, tmp), []string{again, filepath.Dir(second)}; !slices.Equal(got, want) {
		t.Errorf("dsh's descriptors under the spill root: %q, want %q", got, want)
	}

	target := t.TempDir()
	if err := os.RemoveAll(again); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, again); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if got := bash("seq 1 30000"); !strings.HasSuffix(got, "[output truncated; full output: (unavailable)]") {
			t.Errorf("a spill with a symlink in place of the spill directory: %q", got[max(0, len(got)-200):])
		}
	}
	if entries, _ := os.ReadDir(target); len(entries) != 0 {
		t.Errorf("dsh wrote through the symlink: %v", entries)
	}
	log := c.stderr.String()
	if !strings.Contains(log, "the spill directory was deleted; making a new one") || !strings.Contains(log, "the spill directory was moved or replaced") {
		t.Errorf("dsh's warnings:\n%s", log)
	}
	os.Remove(again)
}
