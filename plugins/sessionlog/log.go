package sessionlog

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/jobs"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// queueSize bounds the records waiting for the writer: past it a record is dropped
// (and counted) rather than the call kept waiting. (A variable: tests make it small.)
var queueSize = 4096

// Log is one activation's audit log: the sessions it has seen and the queue to its
// writer.
type Log struct {
	act      *container.Activation
	log      *slog.Logger
	dir      string
	version  string
	maxBytes int64
	retain   time.Duration

	sessions sync.Map // session id → *session

	qmu    sync.RWMutex // closed and sends to queue: none after the writer's last drain
	closed bool
	queue  chan item

	counts counts

	jobsMu sync.Mutex
	jobs   *jobs.Runtime // the runtime watched
}

// session is a session the log has seen: its file, once it has one.
type session struct {
	ready chan struct{} // closed once path is set and the session record queued
	path  string        // "" when its file could not be made
}

// item is one thing for the writer: a record for a session's file, or the end of a
// session (close its file).
type item struct {
	path string
	rec  any // nil: the session ended
}

// counts are what the row's status reports; the writer and the callers update them.
type counts struct {
	written, dropped, failed atomic.Int64
	lastErr                  atomic.Pointer[string]
}

// open makes the directory and starts the writer and its reporter.
func open(a *container.Activation, dir string, cfg *Config, version string) (*Log, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("session-log: %w", err)
	}
	l := &Log{act: a, log: a.Logger(), dir: dir, version: version, maxBytes: cfg.MaxBytes,
		retain: time.Duration(cfg.RetainDays) * 24 * time.Hour, queue: make(chan item, queueSize)}
	w := &writer{l: l, files: map[string]*file{}, put: put}
	a.Go(w.run)
	a.Go(l.report)
	a.SetDetail(l.detail())
	return l, nil
}

// resolve is the bashEnv contributor: the calling session's file (made now, so that a
// confining executor can show it).
func (l *Log) resolve(_ context.Context, call shellenv.Call) (map[string]string, error) {
	if path := l.ensure(call.Session); path != "" {
		return map[string]string{Key: path}, nil
	}
	return nil, nil
}

// ensure returns the session's file, making it and queueing the session's first
// record the first time the session is seen; "" for no session, or a file that could
// not be made (counted and logged).
func (l *Log) ensure(s *container.Session) string {
	if s == nil || s.ID == "" {
		return ""
	}
	v, seen := l.sessions.Load(s.ID)
	if !seen {
		v, seen = l.sessions.LoadOrStore(s.ID, &session{ready: make(chan struct{})})
	}
	st := v.(*session)
	if seen {
		<-st.ready
		return st.path
	}
	defer close(st.ready)
	path := filepath.Join(l.dir, fileName(s.ID))
	f, err := openFile(path, os.O_WRONLY)
	if err != nil {
		l.failed(err)
		return ""
	}
	f.Close()
	st.path = path
	l.enqueue(item{path: path, rec: sessionRecord{Type: "session", TS: now(), Session: s.ID, Role: s.Role,
		Workspace: s.Cwd, Profile: l.act.Profile(), Version: l.version}})
	return path
}

// observe records a call (the registry's observer).
func (l *Log) observe(_ context.Context, ev *tools.Event) {
	l.watchJobs() // the jobs row may have been reloaded since
	if path := l.ensure(ev.Session); path != "" {
		l.enqueue(item{path: path, rec: callOf(ev)})
	}
}

// job records a job's start or finish (the jobs runtime's watcher). A job belongs to a
// session that made a call, so the log has seen it — unless it ended already (the
// jobs row ended its jobs after this row's end hook): the record then goes to the
// session's file all the same.
func (l *Log) job(change jobs.Change, j jobs.Snapshot) {
	if j.Owner == "" {
		return
	}
	path := filepath.Join(l.dir, fileName(j.Owner))
	if v, ok := l.sessions.Load(j.Owner); ok {
		st := v.(*session)
		<-st.ready
		if path = st.path; path == "" {
			return
		}
	}
	l.enqueue(item{path: path, rec: jobRecord{Type: "job", TS: now(), Session: j.Owner, Job: j.ID,
		Event: string(change), Status: string(j.Status), Detail: j.Detail}})
}

// end closes a session's file once what was queued for it is written.
func (l *Log) end(id string) {
	v, ok := l.sessions.LoadAndDelete(id)
	if !ok {
		return
	}
	st := v.(*session)
	<-st.ready
	if st.path != "" {
		l.enqueue(item{path: st.path})
	}
}

// enqueue hands it to the writer without waiting: a full queue drops it, counted.
func (l *Log) enqueue(it item) {
	l.qmu.RLock()
	defer l.qmu.RUnlock()
	if !l.closed {
		select {
		case l.queue <- it:
			return
		default:
		}
	}
	l.counts.dropped.Add(1)
}

// failed counts a write that did not happen.
func (l *Log) failed(err error) {
	l.counts.failed.Add(1)
	msg := err.Error()
	l.counts.lastErr.Store(&msg)
}

// report keeps the row's status and the log up to date with the drops and failures,
// once a second at most.
func (l *Log) report(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var dropped, failed int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d, f := l.counts.dropped.Load(), l.counts.failed.Load()
		if d == dropped && f == failed {
			continue
		}
		if d > dropped {
			l.log.Warn("session-log: records dropped: the writer is behind (queue full)", "dropped", d-dropped, "total", d)
		}
		if f > failed {
			l.log.Error("session-log: records not written", "failed", f-failed, "total", f, "err", l.lastErr())
		}
		dropped, failed = d, f
		l.act.SetDetail(l.detail())
	}
}

func (l *Log) lastErr() string {
	if p := l.counts.lastErr.Load(); p != nil {
		return *p
	}
	return ""
}

// detail is the row's status note: where the files are, and what was lost.
func (l *Log) detail() string {
	s := "writing " + l.dir
	if d := l.counts.dropped.Load(); d > 0 {
		s += fmt.Sprintf("; %d records dropped (queue full)", d)
	}
	if f := l.counts.failed.Load(); f > 0 {
		s += fmt.Sprintf("; %d write failures (last: %s)", f, l.lastErr())
	}
	return s
}

// now is a record's timestamp: RFC 3339, UTC, milliseconds.
func now() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00") }
