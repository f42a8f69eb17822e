package profile

import "github.com/fsnotify/fsnotify"

// SetAddWatch replaces how the Reloader starts watching a directory until restore.
func SetAddWatch(add func(w *fsnotify.Watcher, dir string) error) (restore func()) {
	prev := addWatch
	addWatch = add
	return func() { addWatch = prev }
}
