package mcpserve

import (
	"container/list"
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// The HTTP limits' defaults (HTTPOptions).
const (
	DefaultReadHeaderTimeout       = 10 * time.Second
	DefaultReadTimeout             = 30 * time.Second
	DefaultWriteTimeout            = 30 * time.Second
	DefaultIdleTimeout             = 60 * time.Second
	DefaultMaxUnauthenticatedConns = 128
)

func (o HTTPOptions) readHeaderTimeout() time.Duration {
	return orDefault(o.ReadHeaderTimeout, DefaultReadHeaderTimeout)
}
func (o HTTPOptions) readTimeout() time.Duration { return orDefault(o.ReadTimeout, DefaultReadTimeout) }
func (o HTTPOptions) writeTimeout() time.Duration {
	return orDefault(o.WriteTimeout, DefaultWriteTimeout)
}
func (o HTTPOptions) idleTimeout() time.Duration { return orDefault(o.IdleTimeout, DefaultIdleTimeout) }

func (o HTTPOptions) maxUnauthenticated() int {
	if o.MaxUnauthenticatedConns <= 0 {
		return DefaultMaxUnauthenticatedConns
	}
	return o.MaxUnauthenticatedConns
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// admission bounds the connections that have not yet presented a valid token: when a
// new one would exceed the limit, the oldest of them is closed. A client with a token
// gets in even while someone holds many connections open without one (it authenticates
// with its first request, long before it is the oldest), and the descriptors such
// connections take stay bounded. A connection leaves the count with its first
// authenticated request, or when it closes.
type admission struct {
	max int
	log *slog.Logger

	mu      sync.Mutex
	pending list.List // of *admittedConn, oldest first
	evicted int       // since the last warning
	warned  time.Time
}

// admittedConn is a served connection with its place among the unauthenticated ones.
type admittedConn struct {
	net.Conn
	a    *admission
	elem *list.Element // nil once authenticated or closed; guarded by a.mu
}

type connKey struct{}

// listener wraps ln: every connection it accepts is admitted (see admission).
func (a *admission) listener(ln net.Listener) net.Listener { return admittingListener{ln, a} }

type admittingListener struct {
	net.Listener
	a *admission
}

func (l admittingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.a.admit(c), nil
}

func (a *admission) admit(c net.Conn) *admittedConn {
	ac := &admittedConn{Conn: c, a: a}
	a.mu.Lock()
	var oldest *admittedConn
	if a.pending.Len() >= a.max {
		oldest = a.pending.Remove(a.pending.Front()).(*admittedConn)
		oldest.elem = nil
		a.evicted++
	}
	ac.elem = a.pending.PushBack(ac)
	warn := oldest != nil && time.Since(a.warned) >= time.Minute
	evicted := a.evicted
	if warn {
		a.warned, a.evicted = time.Now(), 0
	}
	a.mu.Unlock()
	if oldest != nil {
		_ = oldest.Conn.Close()
	}
	if warn {
		a.log.Warn("http: closed connections that presented no valid token: too many were open", "limit", a.max, "closed", evicted)
	}
	return ac
}

// authenticated takes c out of the count.
func (c *admittedConn) authenticated() { c.a.leave(c) }

func (c *admittedConn) Close() error {
	c.a.leave(c)
	return c.Conn.Close()
}

func (a *admission) leave(c *admittedConn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.elem != nil {
		a.pending.Remove(c.elem)
		c.elem = nil
	}
}

// connContext hands each request its connection (for authenticated).
func connContext(ctx context.Context, c net.Conn) context.Context {
	if ac, ok := c.(*admittedConn); ok {
		return context.WithValue(ctx, connKey{}, ac)
	}
	return ctx
}

// markAuthenticated takes the connection of r out of the unauthenticated count.
func markAuthenticated(r *http.Request) {
	if ac, ok := r.Context().Value(connKey{}).(*admittedConn); ok {
		ac.authenticated()
	}
}

// writeDeadlines is a ResponseWriter that gives every write and flush the write
// timeout of its own: a long-lived stream lives as long as its client takes each
// event, and a client that stops reading for longer loses the stream.
type writeDeadlines struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func withWriteDeadlines(w http.ResponseWriter, timeout time.Duration) *writeDeadlines {
	return &writeDeadlines{ResponseWriter: w, rc: http.NewResponseController(w), timeout: timeout}
}

func (w *writeDeadlines) arm() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout)) }

func (w *writeDeadlines) Write(p []byte) (int, error) {
	w.arm()
	return w.ResponseWriter.Write(p)
}

func (w *writeDeadlines) WriteHeader(code int) {
	w.arm()
	w.ResponseWriter.WriteHeader(code)
}

func (w *writeDeadlines) Flush() {
	w.arm()
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *writeDeadlines) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// done clears the deadline: the connection may serve another request later.
func (w *writeDeadlines) done() { _ = w.rc.SetWriteDeadline(time.Time{}) }
