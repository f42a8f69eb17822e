package profile_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/container/profile"
)

// reloadRig is a runtime composed from a profile file, with a Reloader on it.
type reloadRig struct {
	t       *testing.T
	dir     string
	path    string
	rt      *container.Runtime
	loader  *profile.Loader
	rl      *profile.Reloader
	j       *journal // apply/dispose
	values  *journal // "<id>=<config value>" as each apply saw it
	mu      sync.Mutex
	results []error // every reload attempt's outcome
}

func newReloadRig(t *testing.T, content string) *reloadRig {
	t.Helper()
	return newReloadRigAt(t, filepath.Join(t.TempDir(), "harness.yaml"), content)
}

// newReloadRigAt is newReloadRig with the profile at path (its directory is created).
func newReloadRigAt(t *testing.T, path, content string) *reloadRig {
	t.Helper()
	g := &reloadRig{t: t, dir: filepath.Dir(path), path: path, j: &journal{}, values: &journal{}}
	mustNil(t, os.MkdirAll(g.dir, 0o755))
	writeFile(t, g.path, content)
	see := func(a *container.Activation, c *testConfig) { g.values.Add("%s=%s", a.ID(), c.Value) }
	g.rt = newRuntime(t,
		plug(g.j, "prov", nil, []string{"x"}, see),
		plug(g.j, "dep", []string{"x"}, nil, see),
		plug(g.j, "other", nil, nil, see),
	)
	g.loader = profile.NewLoader(builtins)
	p, err := g.loader.Load(g.path)
	mustNil(t, err)
	mustNil(t, g.rt.Compose(p.Name, p.Rows))
	g.rl, err = profile.NewReloader(g.rt, g.loader, p, profile.ReloadOptions{
		Debounce: 20 * time.Millisecond,
		Logger:   quiet,
		OnReload: func(err error) {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.results = append(g.results, err)
		},
	})
	mustNil(t, err)
	t.Cleanup(func() { mustNil(t, g.rl.Close()) })
	g.waitAttempts(1) // the check the reloader makes when it starts
	g.j.Take()
	g.values.Take()
	return g
}

func (g *reloadRig) attempts() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.results)
}

func (g *reloadRig) lastResult() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.results[len(g.results)-1]
}

func (g *reloadRig) waitAttempts(n int) {
	g.t.Helper()
	waitFor(g.t, 10*time.Second, "a reload attempt", func() bool { return g.attempts() >= n })
}

// waitValue waits until an apply of row id has seen config value v.
func (g *reloadRig) waitValue(id, v string) {
	g.t.Helper()
	waitFor(g.t, 10*time.Second, "apply of "+id+" with value "+v, func() bool { return g.values.Count(id+"="+v) > 0 })
}

// renameSave writes content the way editors do: a temporary file renamed over the
// profile.
func (g *reloadRig) waitReloadError() {
	g.t.Helper()
	waitFor(g.t, 10*time.Second, "reload error", func() bool { return g.rt.Status().LastReloadError != "" })
}

func (g *reloadRig) waitErrorCleared() {
	g.t.Helper()
	waitFor(g.t, 10*time.Second, "error cleared", func() bool { return g.rt.Status().LastReloadError == "" })
}

// edit writes the rig profile with prov's value set to v and waits until apply sees it.
func (g *reloadRig) edit(v string) {
	g.t.Helper()
	writeFile(g.t, g.path, strings.Replace(rigProfile, "value: one", "value: "+v, 1))
	g.waitValue("prov", v)
}

func (g *reloadRig) renameSave(content string) {
	g.t.Helper()
	tmp := filepath.Join(g.dir, ".harness.yaml.swp")
	writeFile(g.t, tmp, content)
	mustNil(g.t, os.Rename(tmp, g.path))
}

const rigProfile = `
plugins:
  - id: prov
    name: prov
    config: {value: one}
  - id: dep
    name: dep
  - id: other
    name: other
`

// Item 10: a changed config reaches apply after a reload; only that row restarts (its
// dependent follows the cascade), the unrelated row keeps running.
func TestReloadAppliesNewConfig(t *testing.T) {
	g := newReloadRig(t, rigProfile)
	g.edit("two")
	waitFor(t, 10*time.Second, "dependent back", func() bool { return rowStatus(t, g.rt, "dep").State == container.StateActive })
	// The reload is recorded once it is over, just after the cascade's last apply.
	waitFor(t, 10*time.Second, "the reload recorded", func() bool { return g.rt.Status().LastReload != nil })
	wantEntries(t, g.j.Take(), "dispose dep", "dispose prov", "apply prov", "apply dep from prov")
	if err := g.lastResult(); err != nil {
		t.Fatal(err)
	}
	if st := g.rt.Status(); st.LastReloadError != "" {
		t.Fatalf("reload error %q", st.LastReloadError)
	}
	// The status records it: when, applied, and the rows restarted (dep by the cascade).
	rl := g.rt.Status().LastReload
	if rl == nil || rl.Result != container.ReloadApplied || time.Since(rl.At) > time.Minute ||
		strings.Join(rl.Restarted, ",") != "prov,dep" || len(rl.Mounted) != 0 || len(rl.Disposed) != 0 {
		t.Fatalf("last reload %+v", rl)
	}
}

// A refused edit is recorded as failed, and undoing it as undone.
func TestReloadOutcomesRecorded(t *testing.T) {
	g := newReloadRig(t, rigProfile)
	g.renameSave("plugins: [\n")
	g.waitReloadError()
	if rl := g.rt.Status().LastReload; rl == nil || rl.Result != container.ReloadFailed || rl.Error == "" || rl.Error != g.rt.Status().LastReloadError {
		t.Fatalf("after a bad edit: %+v", rl)
	}
	g.renameSave(rigProfile)
	g.waitErrorCleared()
	if rl := g.rt.Status().LastReload; rl == nil || rl.Result != container.ReloadUndone || rl.Error != "" {
		t.Fatalf("after undoing it: %+v", rl)
	}
}

// Item 10: identical content is skipped (no restart), e.g. a save without changes.
func TestReloadSkipsIdenticalContent(t *testing.T) {
	g := newReloadRig(t, rigProfile)
	n := g.attempts()
	writeFile(t, g.path, rigProfile)
	g.waitAttempts(n + 1)
	mustNil(t, g.lastResult())
	wantEntries(t, g.j.Take())
}

// Item 10: rows added, disabled and removed in an edit are mounted and disposed.
func TestReloadAddsAndRemovesRows(t *testing.T) {
	g := newReloadRig(t, rigProfile)
	g.renameSave(`
plugins:
  - id: prov
    name: prov
    config: {value: one}
  - id: dep
    name: dep
    disabled: true
  - id: more
    name: other
    config: {value: added}
`)
	g.waitValue("more", "added")
	wantEntries(t, g.j.Take(), "dispose other", "dispose dep", "apply more")
	var ids []string
	for _, rs := range g.rt.Status().Rows {
		ids = append(ids, rs.ID)
	}
	if strings.Join(ids, ",") != "prov,more" {
		t.Fatalf("rows %q", ids)
	}
}

// Item 10: reload keeps working after editors' rename-saves, several times.
func TestReloadAfterRenameSave(t *testing.T) {
	g := newReloadRig(t, rigProfile)
	for _, v := range []string{"two", "three", "four"} {
		g.renameSave(strings.Replace(rigProfile, "value: one", "value: "+v, 1))
		g.waitValue("prov", v)
	}
}

// Item 10: the file deleted (a failed reload, last good keeps running) and written
// again (reloaded, error cleared), and edits after that still reload.
func TestReloadAfterDeleteAndRewrite(t *testing.T) {
	g := newReloadRig(t, rigProfile)
	n := g.attempts()
	mustNil(t, os.Remove(g.path))
	g.waitReloadError()
	if e := g.rt.Status().LastReloadError; !strings.Contains(e, g.path) || !strings.Contains(e, "does not exist") {
		t.Fatalf("reload error %q", e)
	}
	if g.attempts() <= n {
		t.Fatal("no attempt recorded")
	}
	for id, st := range states(g.rt) {
		if st != container.StateActive {
			t.Fatalf("%s is %s after the file vanished", id, st)
		}
	}
	g.edit("back")
	g.waitErrorCleared()
	g.edit("again")
}

// Removing the profile's whole directory and creating it again: the watch on the old
// directory is gone, so the reloader polls until it can watch the new one.
func TestReloadAfterDirectoryRecreated(t *testing.T) {
	g := newReloadRig(t, rigProfile)
	dir := filepath.Dir(g.path)
	mustNil(t, os.RemoveAll(dir))
	g.waitReloadError()
	mustNil(t, os.MkdirAll(dir, 0o755))
	g.edit("reborn")
	g.waitErrorCleared()
	g.edit("watched")
}

// Deleting the file and writing the same content again just clears the error.
func TestReloadDeleteAndRestoreSameContent(t *testing.T) {
	g := newReloadRig(t, rigProfile)
	mustNil(t, os.Remove(g.path))
	g.waitReloadError()
	writeFile(t, g.path, rigProfile)
	g.waitErrorCleared()
	wantEntries(t, g.j.Take())
}

// Item 10: an invalid edit keeps the last good composition running and records the
// error (naming file, row, key); a later good edit applies and clears it.
func TestReloadInvalidEditKeepsLastGood(t *testing.T) {
	g := newReloadRig(t, rigProfile)
	for _, bad := range []struct{ content, want string }{
		{"plugins: [\n", g.path + ": line 1, column 10: invalid YAML:"},
		{strings.Replace(rigProfile, "name: other", "name: nope", 1), g.path + `: row "other": module not found: nope`},
		{strings.Replace(rigProfile, "value: one", "value: one, limit: -1", 1), g.path + `: row "prov": prov: limit must not be negative, got -1`},
		{strings.Replace(rigProfile, "value: one", "valeu: one", 1), g.path + `: row "prov": config: unknown key "valeu"`},
		{strings.Replace(rigProfile, "    name: dep", "    name: dep\n    colour: red", 1), g.path + `: row "dep": unknown key "colour"`},
	} {
		n := g.attempts()
		writeFile(t, g.path, bad.content)
		g.waitAttempts(n + 1)
		waitFor(t, 10*time.Second, "recorded error", func() bool {
			return strings.Contains(g.rt.Status().LastReloadError, bad.want)
		})
		wantErrContains(t, g.lastResult(), bad.want)
		for id, st := range states(g.rt) {
			if st != container.StateActive {
				t.Fatalf("%s is %s after an invalid edit", id, st)
			}
		}
		wantEntries(t, g.j.Take())
	}
	g.edit("fixed")
	g.waitErrorCleared()
}

// Item 10: bases are watched too, and the watched set follows the extends chain.
func TestReloadWatchesBases(t *testing.T) {
	g := newReloadRig(t, "plugins: []\n")
	baseDir := filepath.Join(g.dir, "bases")
	mustNil(t, os.Mkdir(baseDir, 0o755))
	base := filepath.Join(baseDir, "base.yaml")
	writeFile(t, base, rigProfile)
	g.renameSave("extends: bases/base.yaml\nplugins:\n  - id: other\n    config: {value: leaf}\n")
	g.waitValue("other", "leaf")
	// An edit of the base alone reloads.
	writeFile(t, base, strings.Replace(rigProfile, "value: one", "value: from-base", 1))
	g.waitValue("prov", "from-base")

	// Move the chain to another base in another directory; that one is watched now.
	otherDir := filepath.Join(g.dir, "elsewhere")
	mustNil(t, os.Mkdir(otherDir, 0o755))
	base2 := filepath.Join(otherDir, "base2.yaml")
	writeFile(t, base2, strings.Replace(rigProfile, "value: one", "value: base2", 1))
	g.renameSave("extends: elsewhere/base2.yaml\n")
	g.waitValue("prov", "base2")
	writeFile(t, base2, strings.Replace(rigProfile, "value: one", "value: base2-edit", 1))
	g.waitValue("prov", "base2-edit")

	// A base that does not exist yet: the error names it; creating it reloads.
	g.renameSave("extends: later.yaml\n")
	waitFor(t, 10*time.Second, "missing base error", func() bool {
		return strings.Contains(g.rt.Status().LastReloadError, filepath.Join(g.dir, "later.yaml"))
	})
	writeFile(t, filepath.Join(g.dir, "later.yaml"), strings.Replace(rigProfile, "value: one", "value: later", 1))
	g.waitValue("prov", "later")
}

// Built-in profiles are not watched.
func TestReloaderRefusesBuiltins(t *testing.T) {
	rt := newRuntime(t)
	p, err := profile.NewLoader(builtins).Load("minimal")
	mustNil(t, err)
	_, err = profile.NewReloader(rt, profile.NewLoader(builtins), p, profile.ReloadOptions{})
	wantErrContains(t, err, "built-in profiles do not change")
}

// Reload can be triggered by hand; Close is idempotent and stops everything (goleak in
// TestMain checks the goroutines).
func TestReloadByHandAndClose(t *testing.T) {
	g := newReloadRig(t, rigProfile)
	writeFile(t, g.path, strings.Replace(rigProfile, "value: one", "value: manual", 1))
	mustNil(t, g.rl.Reload())
	if g.values.Count("prov=manual") != 1 {
		t.Fatalf("manual reload did not apply: %q", g.values.Take())
	}
	mustNil(t, g.rl.Close())
	mustNil(t, g.rl.Close())
}

// A symlinked profile (a dotfiles setup): editing the target reloads.
func TestReloadFollowsSymlinkedProfile(t *testing.T) {
	g := newReloadRig(t, rigProfile)
	dotfiles := filepath.Join(g.dir, "dotfiles")
	mustNil(t, os.Mkdir(dotfiles, 0o755))
	target := filepath.Join(dotfiles, "real.yaml")
	writeFile(t, target, strings.Replace(rigProfile, "value: one", "value: linked", 1))
	tmp := filepath.Join(g.dir, ".link")
	mustNil(t, os.Symlink(target, tmp))
	mustNil(t, os.Rename(tmp, g.path))
	g.waitValue("prov", "linked")
	writeFile(t, target, strings.Replace(rigProfile, "value: one", "value: edited-target", 1))
	g.waitValue("prov", "edited-target")
}

// A named pipe at the profile's path never blocks the reloader: the open does not wait
// for a writer, the reload fails naming the file type (the last good composition keeps
// running), a regular file written there again reloads, and Close returns.
func TestReloadFIFOAtProfilePath(t *testing.T) {
	g := newReloadRig(t, rigProfile)
	mustNil(t, os.Remove(g.path))
	mustNil(t, syscall.Mkfifo(g.path, 0o644))
	waitFor(t, 10*time.Second, "the named-pipe error", func() bool {
		return strings.Contains(g.rt.Status().LastReloadError, g.path+": not a regular file (a named pipe): a profile must be a regular file")
	})
	for id, st := range states(g.rt) {
		if st != container.StateActive {
			t.Fatalf("%s is %s after the named pipe", id, st)
		}
	}
	mustNil(t, os.Remove(g.path))
	g.edit("after-fifo")
	g.waitErrorCleared()
	// A directory and a device are refused the same way.
	mustNil(t, os.Remove(g.path))
	mustNil(t, os.Symlink("/dev/zero", g.path))
	waitFor(t, 10*time.Second, "the device error", func() bool {
		return strings.Contains(g.rt.Status().LastReloadError, "not a regular file (a character device)")
	})
	mustNil(t, os.Remove(g.path))
	mustNil(t, syscall.Mkfifo(g.path, 0o644))
	closed := make(chan error, 1)
	go func() { closed <- g.rl.Close() }()
	select {
	case err := <-closed:
		mustNil(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close blocked with a named pipe at the profile path")
	}
}

// The profile's directory renamed away and a new one made at its path: the watch
// follows the path, not the old directory.
func TestReloadAfterDirectoryRenamed(t *testing.T) {
	g := newReloadRigAt(t, filepath.Join(t.TempDir(), "conf", "harness.yaml"), rigProfile)
	mustNil(t, os.Rename(g.dir, g.dir+".old"))
	mustNil(t, os.Mkdir(g.dir, 0o755))
	g.edit("new-dir")
	g.edit("new-dir-again")
	// An edit of the old directory's file is not the profile any more.
	writeFile(t, filepath.Join(g.dir+".old", "harness.yaml"), strings.Replace(rigProfile, "value: one", "value: stale", 1))
	g.edit("still-new")
	if g.values.Count("prov=stale") != 0 {
		t.Fatal("the renamed directory's file was applied")
	}
}

// A parent of the profile's directory renamed and replaced (the directory's own name
// does not change, so it sends no event): the periodic check watches the path again.
func TestReloadAfterParentReplaced(t *testing.T) {
	top := filepath.Join(t.TempDir(), "top")
	g := newReloadRigAt(t, filepath.Join(top, "conf", "harness.yaml"), rigProfile)
	mustNil(t, os.Rename(top, top+".old"))
	mustNil(t, os.MkdirAll(g.dir, 0o755))
	g.edit("replaced-parent")
	g.waitErrorCleared()
	g.edit("replaced-parent-again")
}

// A directory the profile needs that cannot be watched is a reload error in status
// (edits there would go unseen), retried until it can be watched.
func TestReloadReportsUnwatchableDirectory(t *testing.T) {
	g := newReloadRig(t, rigProfile)
	baseDir := filepath.Join(g.dir, "bases")
	mustNil(t, os.Mkdir(baseDir, 0o755))
	writeFile(t, filepath.Join(baseDir, "base.yaml"), strings.Replace(rigProfile, "value: one", "value: based", 1))
	var mu sync.Mutex
	refuse := true
	restore := profile.SetAddWatch(func(w *fsnotify.Watcher, dir string) error {
		mu.Lock()
		defer mu.Unlock()
		if refuse && dir == baseDir {
			return syscall.ENOSPC
		}
		return w.Add(dir)
	})
	defer restore()
	g.renameSave("extends: bases/base.yaml\n")
	g.waitValue("prov", "based")
	want := "cannot watch " + baseDir + " for changes (no space left on device): edits to the profile are not applied until it can be watched (retrying every 1s)"
	waitFor(t, 10*time.Second, "the watch error", func() bool { return g.rt.Status().LastReloadError == want })
	mu.Lock()
	refuse = false
	mu.Unlock()
	g.waitErrorCleared()
	writeFile(t, filepath.Join(baseDir, "base.yaml"), strings.Replace(rigProfile, "value: one", "value: watched", 1))
	g.waitValue("prov", "watched")
}
