package sessionlog

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"
)

// Cadences of the writer.
const (
	// idleClose is how long a file stays open without a record.
	idleClose = time.Minute
	// pruneEvery is how often files past retention are removed (and once at start).
	pruneEvery = time.Hour
)

// put is how the writer writes to a file; tests stand in a disk that stalls.
var put = (*os.File).Write

// writer is the one goroutine that writes the files.
type writer struct {
	l     *Log
	files map[string]*file // by path
	// put writes to a file: (*os.File).Write, or a stand-in for a disk that stalls.
	put func(f *os.File, b []byte) (int, error)
}

// file is an open session file.
type file struct {
	f    *os.File
	size int64
	used time.Time
}

// run writes what is queued until the activation ends, then what is left.
func (w *writer) run(ctx context.Context) {
	w.prune()
	prune := time.NewTicker(pruneEvery)
	defer prune.Stop()
	idle := time.NewTicker(idleClose)
	defer idle.Stop()
	for {
		select {
		case it := <-w.l.queue:
			w.handle(it)
		case <-idle.C:
			w.closeIdle(time.Now().Add(-idleClose))
		case <-prune.C:
			w.prune()
		case <-ctx.Done():
			w.drain()
			return
		}
	}
}

// drain writes what is queued, refuses more, and closes the files.
func (w *writer) drain() {
	w.l.qmu.Lock()
	w.l.closed = true
	w.l.qmu.Unlock()
	for {
		select {
		case it := <-w.l.queue:
			w.handle(it)
		default:
			w.closeIdle(time.Now().Add(time.Hour))
			return
		}
	}
}

// handle writes one record, or closes a session's file.
func (w *writer) handle(it item) {
	if it.rec == nil {
		if f := w.files[it.path]; f != nil {
			f.f.Close()
			delete(w.files, it.path)
		}
		return
	}
	line, err := json.Marshal(it.rec)
	if err != nil {
		w.l.failed(fmt.Errorf("encode a record: %w", err))
		return
	}
	if err := w.write(it.path, append(line, '\n')); err != nil {
		w.l.failed(err)
		return
	}
	w.l.counts.written.Add(1)
}

// write appends line to the file at path, rotating it first when the line would take
// it past maxBytes.
func (w *writer) write(path string, line []byte) error {
	f, err := w.open(path)
	if err != nil {
		return err
	}
	if f.size > 0 && f.size+int64(len(line)) > w.l.maxBytes {
		if err := rotate(path, f); err != nil {
			return err
		}
	}
	n, err := w.put(f.f, line)
	f.size += int64(n)
	f.used = time.Now()
	return err
}

// open returns the open file at path, opening it (created if missing, never through a
// symbolic link) when it is not.
func (w *writer) open(path string) (*file, error) {
	if f := w.files[path]; f != nil {
		return f, nil
	}
	fd, err := openFile(path, os.O_RDWR)
	if err != nil {
		return nil, err
	}
	st, err := fd.Stat()
	if err != nil {
		fd.Close()
		return nil, err
	}
	f := &file{f: fd, size: st.Size()}
	w.files[path] = f
	return f, nil
}

// openFile opens a session file for mode (O_WRONLY, O_RDWR), appending, made if
// missing. Nothing else than a regular file is opened: not through a symbolic link,
// and never waiting (a FIFO planted there fails at once).
func openFile(path string, mode int) (*os.File, error) {
	f, err := os.OpenFile(path, mode|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return f, nil
}

// rotate copies the file to <path>.1 (replacing an older one) and empties it: the file
// itself stays, so that whoever shows it (a box's read-only view) keeps seeing the
// current one.
func rotate(path string, f *file) error {
	tmp := path + ".1.tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("rotate %s: %w", path, err)
	}
	_, err = io.Copy(out, io.NewSectionReader(f.f, 0, f.size))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path+".1")
	}
	if err == nil {
		err = f.f.Truncate(0)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rotate %s: %w", path, err)
	}
	f.size = 0
	return nil
}

// closeIdle closes the files not written since before.
func (w *writer) closeIdle(before time.Time) {
	for path, f := range w.files {
		if f.used.Before(before) {
			f.f.Close()
			delete(w.files, path)
		}
	}
}

// prune removes the session files (and their rotations) not modified for retainDays;
// open files are kept.
func (w *writer) prune() {
	entries, err := os.ReadDir(w.l.dir)
	if err != nil {
		w.l.log.Warn("session-log: cannot list the directory to prune it", "err", err)
		return
	}
	cutoff := time.Now().Add(-w.l.retain)
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !(strings.HasSuffix(name, ".jsonl") || strings.HasSuffix(name, ".jsonl.1")) {
			continue
		}
		path := w.l.dir + string(os.PathSeparator) + name
		if w.files[path] != nil {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
			if err := os.Remove(path); err != nil {
				w.l.log.Warn("session-log: cannot prune", "file", path, "err", err)
			}
		}
	}
}
