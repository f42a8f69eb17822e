package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Endpoint is the one HTTP path Serve answers on; every other path is 404.
const Endpoint = "/mcp"

// DefaultMaxSessions is HTTPOptions.MaxSessions when it is 0.
const DefaultMaxSessions = 64

// maxBodyBytes bounds a request body (the SDK's default).
const maxBodyBytes = mcp.DefaultMaxRequestBodyBytes

// HTTPOptions configure Serve.
type HTTPOptions struct {
	// Tokens are the bearer tokens, one per principal (clients that share a token share
	// a principal). Serve refuses to start without one.
	Tokens []string
	// Roles, when set, holds one role per token (Roles[i] for Tokens[i]): the role
	// (container.Session.Role) of the harness sessions that token's requests make — its
	// principal's and its session-lane sessions'. An empty role leaves NewSession's.
	Roles []string
	// AllowRemote lets Serve listen on a non-loopback (or non-TCP) address, which it
	// refuses otherwise.
	AllowRemote bool
	// MaxSessions bounds the harness sessions HTTP clients hold at once: session-lane
	// MCP sessions plus stateless-lane principals (HTTP 503 beyond). 0 means
	// DefaultMaxSessions.
	MaxSessions int
	// SessionTimeout ends a session-lane MCP session or a principal that has gone this
	// long without a request, and with it the harness session and its jobs. 0: never.
	SessionTimeout time.Duration

	// The limits on connections; 0 means the Default… value. ReadHeaderTimeout bounds
	// a request's headers, ReadTimeout its body; WriteTimeout bounds each write of a
	// response (every event of a stream gets its own, so a stream lives as long as its
	// client reads it); IdleTimeout closes a kept-alive connection without a request.
	// MaxUnauthenticatedConns bounds the connections that have not yet sent a request
	// with a valid token: beyond it the oldest of them is closed. A response without a
	// valid token (401) closes its connection.
	ReadHeaderTimeout       time.Duration
	ReadTimeout             time.Duration
	WriteTimeout            time.Duration
	IdleTimeout             time.Duration
	MaxUnauthenticatedConns int
}

// drainTimeout bounds how long Serve waits, once its context has ended, for the calls
// in flight (aborted by then) to send their answers.
const drainTimeout = 10 * time.Second

// Serve serves streamable HTTP at Endpoint on ln until ctx ends; then it stops
// accepting, lets the calls in flight (aborted with ctx) send their answers, ends every
// harness session of its clients and the open streams, and returns nil. It closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if err := s.http.check(ln.Addr()); err != nil {
		ln.Close()
		return err
	}
	f := newHTTPFront(ctx, s)
	reqCtx, cancelRequests := context.WithCancel(context.Background())
	defer cancelRequests()
	admit := &admission{max: s.http.maxUnauthenticated(), log: s.log}
	srv := &http.Server{
		Handler:           f.handler(),
		ReadHeaderTimeout: s.http.readHeaderTimeout(),
		IdleTimeout:       s.http.idleTimeout(),
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
		ConnContext:       connContext,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(admit.listener(ln)) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), drainTimeout+5*time.Second)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		// No new connections; idle ones closed; Shutdown then waits for the rest.
		if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			s.log.Debug("http shutdown", "err", err)
		}
		close(stopped)
	}()
	// Every call in flight was aborted with ctx: its answer ("tool call aborted") goes
	// out before the sessions and streams end, never an empty response.
	f.calls.wait(drainTimeout)
	f.shutdown()
	cancelRequests()
	select {
	case <-stopped:
	case <-time.After(closeGrace):
		// What is left reads a request body that is not coming (a stalled upload): the
		// calls have answered and the sessions ended, so its connection is closed.
		_ = srv.Close()
		<-stopped
	}
	<-errc
	return nil
}

// closeGrace is how long a shutdown waits, once the calls have answered, for the
// connections still reading a request to finish before it closes them.
const closeGrace = time.Second

// check refuses to serve without a token, or on a non-loopback address unless allowed.
func (o HTTPOptions) check(addr net.Addr) error {
	if len(o.Tokens) == 0 {
		return errors.New("mcpserve: no bearer token (HTTPOptions.Tokens)")
	}
	if o.Roles != nil && len(o.Roles) != len(o.Tokens) {
		return fmt.Errorf("mcpserve: %d roles for %d tokens (HTTPOptions.Roles)", len(o.Roles), len(o.Tokens))
	}
	if tcp, ok := addr.(*net.TCPAddr); !o.AllowRemote && (!ok || !tcp.IP.IsLoopback()) {
		return fmt.Errorf("mcpserve: refusing to serve on non-loopback address %s (HTTPOptions.AllowRemote is off)", addr)
	}
	return nil
}

func (o HTTPOptions) maxSessions() int {
	if o.MaxSessions <= 0 {
		return DefaultMaxSessions
	}
	return o.MaxSessions
}

// httpFront serves Endpoint: bearer-token authentication, then each request on the lane
// its protocol revision asks for — the stateless lane (2026-07-28: the token's principal
// is the harness session) or the session lane (every MCP session is a harness session)
// — within the session limit.
type httpFront struct {
	s             *Server
	base          context.Context // the serving's: scopes end with it
	auth          tokens
	sessions      *scope // the session lane's server
	sessionLane   *mcp.StreamableHTTPHandler
	statelessLane *mcp.StreamableHTTPHandler

	createMu sync.Mutex // serializes session creation against the limit
	calls    inflight   // requests whose answers must go out before shutdown

	mu         sync.Mutex
	principals map[string]*principal
}

type principalKey struct{}

func newHTTPFront(base context.Context, s *Server) *httpFront {
	f := &httpFront{s: s, base: base, auth: newTokens(s.http.Tokens, s.http.Roles), principals: map[string]*principal{}}
	f.sessions = s.newScope(base, nil, sessionProtocolVersions)
	f.sessionLane = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.sessions.server },
		&mcp.StreamableHTTPOptions{Logger: s.sdkLog, SessionTimeout: s.http.SessionTimeout})
	f.statelessLane = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if p, ok := r.Context().Value(principalKey{}).(*principal); ok {
			return p.scope.server
		}
		return nil
	}, &mcp.StreamableHTTPOptions{Logger: s.sdkLog, Stateless: true, PropagateRequestCancellation: true})
	return f
}

// handler is the whole HTTP surface: Endpoint behind the bearer token, 404 elsewhere;
// every write of a response within the write timeout.
func (f *httpFront) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(Endpoint, f.authenticate(http.HandlerFunc(f.route)))
	timeout := f.s.http.writeTimeout()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dw := withWriteDeadlines(w, timeout)
		defer dw.done()
		mux.ServeHTTP(dw, r)
	})
}

// route sends each request to its lane. A POST's body is read whole first, within the
// read timeout and before any lock (a client that stalls its upload holds up no one
// else): a request is stateless-lane when its Mcp-Protocol-Version header or its _meta
// names the 2026-07-28 revision (or later); a batch is refused on a revision without
// batches; a request carrying a call is awaited at shutdown.
func (f *httpFront) route(w http.ResponseWriter, r *http.Request) {
	var msg message
	if r.Method == http.MethodPost {
		var ok bool
		if msg, ok = f.readMessage(w, r); !ok {
			return
		}
	}
	stateless := msg.stateless
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
		stateless = isStateless(v)
	}
	if msg.batch {
		if refusal := f.batchRefusal(r, stateless); refusal != "" {
			http.Error(w, refusal, http.StatusBadRequest)
			return
		}
	}
	if msg.call {
		if !f.calls.add() {
			http.Error(w, "the server is shutting down", http.StatusServiceUnavailable)
			return
		}
		defer f.calls.done()
	}
	if stateless {
		f.serveStateless(w, r)
		return
	}
	if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
		// A new session (or a sessionless request, which the SDK answers at once); its
		// body is in memory already.
		f.createMu.Lock()
		if n := f.count(); n >= f.s.http.maxSessions() {
			f.createMu.Unlock()
			f.refuse(w)
			return
		}
		defer f.createMu.Unlock()
	}
	f.sessionLane.ServeHTTP(w, r)
}

// count is the number of harness sessions HTTP clients hold: session-lane MCP sessions
// and stateless principals.
func (f *httpFront) count() int {
	f.mu.Lock()
	n := len(f.principals)
	f.mu.Unlock()
	return n + f.sessions.sessionCount()
}

func (f *httpFront) refuse(w http.ResponseWriter) {
	limit := f.s.http.maxSessions()
	// The text names dsh's flag: it is what users of `dsh serve` read.
	f.s.log.Warn("session refused: the session limit is reached", "maxSessions", limit)
	http.Error(w, fmt.Sprintf("session limit reached: %d sessions are open in this harness (--max-sessions)", limit), http.StatusServiceUnavailable)
}

// shutdown ends every harness session of the HTTP clients.
func (f *httpFront) shutdown() {
	f.sessions.closeSessions()
	f.s.dropScope(f.sessions)
	f.mu.Lock()
	ps := make([]*principal, 0, len(f.principals))
	for _, p := range f.principals {
		if p.timer != nil {
			p.timer.Stop()
		}
		p.gone = true
		ps = append(ps, p)
	}
	f.principals = map[string]*principal{}
	f.mu.Unlock()
	for _, p := range ps {
		f.s.dropScope(p.scope)
		f.s.rt.EndSession(p.session.ID)
	}
}

// inflight counts the requests whose answers must go out before shutdown. Once wait
// has begun it admits no more.
type inflight struct {
	mu      sync.Mutex
	n       int
	closing bool
	idle    chan struct{} // closed when n reaches 0 while closing
}

func (c *inflight) add() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return false
	}
	c.n++
	return true
}

func (c *inflight) done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n--
	if c.n == 0 && c.closing {
		close(c.idle)
	}
}

// wait closes c to new requests and returns once none is in flight, or after timeout.
func (c *inflight) wait(timeout time.Duration) {
	c.mu.Lock()
	c.closing = true
	c.idle = make(chan struct{})
	if c.n == 0 {
		close(c.idle)
	}
	idle := c.idle
	c.mu.Unlock()
	select {
	case <-idle:
	case <-time.After(timeout):
	}
}
