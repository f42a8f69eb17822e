package profile

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/dsh-dev/dsh/container"
)

// DefaultDebounce is how long a Reloader waits after the last change before reloading.
const DefaultDebounce = 100 * time.Millisecond

// ReloadOptions configure a Reloader. Zero values take the defaults noted.
type ReloadOptions struct {
	// Debounce is the quiet period after the last change before a reload (default
	// DefaultDebounce): an editor's save is several events.
	Debounce time.Duration
	// Logger receives reload outcomes (default: slog.Default()).
	Logger *slog.Logger
	// OnReload, when set, is called after every reload attempt with its outcome: nil
	// when the new profile is running or the content was unchanged. It runs on the
	// reloader's goroutine.
	OnReload func(err error)
}

// Reloader keeps a runtime's composition in step with a profile file: it watches the
// directories of the profile and of its bases (editors save by renaming a new file over
// the old one, and a deleted file may be written again later), debounces, skips content
// identical to what is running, loads the profile afresh, and composes it (the runtime
// validates the whole profile first and then restarts only the rows that changed). A
// failed reload leaves the last good composition running; its error is logged and
// recorded in Status.LastReloadError until a later reload succeeds. Each outcome is
// logged — a good one with the rows it mounted, restarted and disposed — and recorded
// as Status.LastReload.
//
// A watched directory that is renamed, removed or replaced (the watch follows the old
// directory, which sends no events for the new one) is watched again at its path: at
// once when its own rename or removal is seen, else within dirCheck, which compares
// each watched directory with what its path names now. While a directory the profile
// needs cannot be watched, the reloader polls and Status.LastReloadError says so: edits
// would not be seen, and a status without an error would be a lie.
type Reloader struct {
	rt       *container.Runtime
	loader   *Loader
	spec     string // the profile file's absolute path
	name     string // the profile's name in status, as first given
	debounce time.Duration
	log      *slog.Logger
	onReload func(error)
	watcher  *fsnotify.Watcher

	reloadMu sync.Mutex // serializes reloads (the loop and Reload)
	good     *Profile   // the profile that is running
	files    map[string]bool
	dirs     map[string]bool
	ids      map[string]dirID // what each watched directory was when its watch began
	watchErr error            // why a needed directory is not watched (nil: all are)

	recheck chan struct{} // asks the loop for another (debounced) check
	retry   *time.Timer   // re-checks while a needed directory cannot be watched
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// NewReloader starts watching current (the profile the runtime is running, as loaded by
// loader) and reloading it into rt on change. A built-in profile has no file to watch:
// that is an error. Close stops it.
func NewReloader(rt *container.Runtime, loader *Loader, current *Profile, opts ReloadOptions) (*Reloader, error) {
	if current == nil || current.Path == "" {
		return nil, errors.New("reload: only a profile file can be watched (built-in profiles do not change)")
	}
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("reload: %w", err)
	}
	r := &Reloader{
		rt: rt, loader: loader, spec: current.Path, name: current.Name, debounce: opts.Debounce,
		log: opts.Logger.With("profile", current.Path), onReload: opts.OnReload, watcher: w,
		good: current, files: map[string]bool{}, dirs: map[string]bool{}, ids: map[string]dirID{},
		recheck: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	r.rewatch(nil)
	if !r.dirs[filepath.Dir(current.Path)] {
		w.Close()
		return nil, fmt.Errorf("reload: cannot watch the directory of %s", current.Path)
	}
	go r.loop()
	return r, nil
}

// Close stops watching and waits for a reload in progress to finish. It is idempotent.
func (r *Reloader) Close() error {
	var err error
	r.once.Do(func() {
		close(r.stop)
		<-r.done
		r.reloadMu.Lock()
		if r.retry != nil {
			r.retry.Stop()
		}
		r.reloadMu.Unlock()
		err = r.watcher.Close()
	})
	return err
}

func (r *Reloader) loop() {
	defer close(r.done)
	timer := time.NewTimer(0) // one check at start: the file may have changed before the watch began
	check := time.NewTicker(dirCheck)
	defer check.Stop()
	for {
		select {
		case <-r.stop:
			timer.Stop()
			return
		case ev, ok := <-r.watcher.Events:
			if !ok {
				return
			}
			// A mode change counts: a profile made readable again must clear its error.
			// So does an event on a watched directory itself (renamed or removed: its
			// watch has ended, and the next check watches its path again).
			if !r.watched(filepath.Clean(ev.Name)) {
				continue
			}
			timer.Reset(r.debounce)
		case <-check.C:
			if r.replacedDirs() {
				timer.Reset(r.debounce)
			}
		case err, ok := <-r.watcher.Errors:
			if !ok {
				return
			}
			// E.g. an event queue overflow: a change may have been missed, so check.
			r.log.Warn("profile watch error", "err", err)
			timer.Reset(r.debounce)
		case <-r.recheck:
			timer.Reset(r.debounce)
		case <-timer.C:
			r.Reload()
		}
	}
}

// watched reports whether name is a file the profile reads or a directory watched for
// it.
func (r *Reloader) watched(name string) bool {
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	return r.files[name] || r.dirs[name]
}

// Reload loads and composes the profile now, as if a change had been seen. It returns
// the reload's error (also recorded in the runtime's status).
func (r *Reloader) Reload() (err error) {
	r.reloadMu.Lock()
	defer func() {
		r.reloadMu.Unlock()
		if r.onReload != nil {
			r.onReload(err)
		}
	}()
	p, attempted, err := r.loader.load(r.spec)
	if r.rewatch(attempted) {
		// A file in a newly watched directory may have changed after it was read and
		// before the watch began: look again (unchanged content is skipped).
		r.askRecheck()
	} else if r.unwatchable() {
		// A directory that cannot be watched (removed, not created yet) sends no events:
		// poll until it can be.
		r.retryLater()
	}
	if err == nil && p.Digest == r.good.Digest {
		// What is on disk is what runs (perhaps again, after a failed edit was undone).
		if last := r.rt.Status().LastReloadError; last != "" && (r.watchErr == nil || last != r.watchErr.Error()) {
			r.log.Info("profile reload undone: the file is what runs again")
			r.rt.RecordReload(container.Reload{At: time.Now(), Result: container.ReloadUndone})
		}
		r.rt.SetLastReloadError(r.watchErr) // a directory it cannot watch stays an error
		return nil
	}
	var changes container.Changes
	if err == nil {
		changes, err = r.rt.ComposeChanges(r.name, p.Files, p.Rows)
	}
	if err != nil {
		r.log.Error("profile reload failed; the last good composition keeps running", "err", err)
		r.rt.RecordReload(container.Reload{At: time.Now(), Result: container.ReloadFailed, Error: err.Error()})
		return err
	}
	r.good = p
	r.rewatch(nil) // stop watching directories only the old profile needed
	r.rt.RecordReload(container.Reload{At: time.Now(), Result: container.ReloadApplied, Changes: changes})
	r.rt.SetLastReloadError(r.watchErr) // a directory it cannot watch stays an error
	r.log.Info("profile reloaded", "files", len(p.Files),
		"mounted", rowList(changes.Mounted), "restarted", rowList(changes.Restarted), "disposed", rowList(changes.Disposed))
	warnStuck(r.log, r.rt, p.Rows)
	return nil
}

// rowList is row ids as a reload's log line shows them: "bash,tool-bash", or "none".
func rowList(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ",")
}

func (r *Reloader) askRecheck() {
	select {
	case r.recheck <- struct{}{}:
	default:
	}
}

// unwatchRetry is how often a directory that could not be watched is tried again.
const unwatchRetry = time.Second

// dirCheck is how often the watched directories are compared with what their paths
// name now: a directory replaced under a renamed parent sends no event of its own.
const dirCheck = 2 * time.Second

// retryLater asks for a check after unwatchRetry. Called with reloadMu held.
func (r *Reloader) retryLater() {
	if r.retry == nil {
		r.retry = time.AfterFunc(unwatchRetry, r.askRecheck)
		return
	}
	r.retry.Reset(unwatchRetry)
}

// unwatchable reports whether a directory the profile needs is not being watched.
// Called with reloadMu held.
func (r *Reloader) unwatchable() bool {
	watching := r.watching()
	for f := range r.files {
		if !watching[filepath.Dir(f)] {
			return true
		}
	}
	return false
}

// rewatch makes the watched directories those of the running profile's files and of the
// files the last attempt read (bases may have been added, removed or moved), and reports
// whether it began watching a directory. Called with reloadMu held, or before the loop
// starts.
func (r *Reloader) rewatch(attempted []string) (added bool) {
	files := map[string]bool{}
	for _, f := range r.good.Files {
		files[f] = true
	}
	for _, f := range attempted {
		files[f] = true
	}
	// A symlinked profile (dotfiles) changes where its target lives: watch that too.
	for f := range files {
		if real, err := filepath.EvalSymlinks(f); err == nil && real != f {
			files[real] = true
		}
	}
	dirs := map[string]bool{}
	for f := range files {
		dirs[filepath.Dir(f)] = true
	}
	watching := r.watching()
	var add []string
	for d := range dirs {
		if !watching[d] {
			add = append(add, d)
		}
	}
	sort.Strings(add)
	var watchErr error
	for _, d := range add {
		// The identity first: a directory replaced between the two is seen by dirCheck.
		id, idErr := dirIdentity(d)
		if err := addWatch(r.watcher, d); err != nil {
			r.log.Warn("cannot watch profile directory", "dir", d, "err", err)
			delete(dirs, d)
			if _, statErr := os.Stat(d); !errors.Is(statErr, fs.ErrNotExist) && watchErr == nil {
				// A directory that does not exist yet is the load's error to report.
				watchErr = fmt.Errorf("cannot watch %s for changes (%w): edits to the profile are not applied until it can be watched (retrying every %s)", d, err, unwatchRetry)
			}
			continue
		}
		if idErr == nil {
			r.ids[d] = id
		}
		added = true
	}
	for d := range watching {
		if !dirs[d] {
			_ = r.watcher.Remove(d) // fails harmlessly if the directory is gone
			delete(r.ids, d)
		}
	}
	r.files, r.dirs, r.watchErr = files, dirs, watchErr
	return added
}

// addWatch starts watching a directory (a variable for the tests).
var addWatch = (*fsnotify.Watcher).Add

// dirID is a directory's identity: its device and inode.
type dirID struct{ dev, ino uint64 }

func dirIdentity(dir string) (dirID, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return dirID{}, err
	}
	return dirID{dev: uint64(st.Dev), ino: st.Ino}, nil
}

// replacedDirs ends the watch of every watched directory whose path now names another
// directory, or nothing, and reports whether there was one: the next reload watches
// the path again.
func (r *Reloader) replacedDirs() bool {
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	replaced := false
	for d, id := range r.ids {
		if now, err := dirIdentity(d); err == nil && now == id {
			continue
		}
		r.log.Info("profile directory replaced; watching its path again", "dir", d)
		_ = r.watcher.Remove(d)
		delete(r.ids, d)
		replaced = true
	}
	return replaced
}

// watching returns the directories being watched. It asks the watcher, not r.dirs: a
// watch ends by itself when its directory is removed.
func (r *Reloader) watching() map[string]bool {
	watching := map[string]bool{}
	for _, d := range r.watcher.WatchList() {
		watching[d] = true
	}
	for d := range r.ids {
		if !watching[d] {
			delete(r.ids, d) // its watch ended with the directory
		}
	}
	return watching
}
