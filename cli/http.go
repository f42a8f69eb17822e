package cli

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/container"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
)

// mcpPath is the one HTTP endpoint.
const mcpPath = "/mcp"

// maxBodyBytes bounds a request body (the SDK's default).
const maxBodyBytes = mcp.DefaultMaxRequestBodyBytes

// httpOptions configure `dsh serve --http`.
type httpOptions struct {
	addr           string
	allowRemote    bool
	tokenFile      string
	maxSessions    int
	sessionTimeout time.Duration
}

// refusal ends the command with exit status 2 and its message (no usage hint).
type refusal struct{ error }

// checkAddr refuses a non-loopback address unless remote serving is allowed. A host
// name counts as loopback when every address it resolves to is.
func checkAddr(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usageError{fmt.Errorf("--http %q: %w", addr, err)}
	}
	if allowRemote || loopbackHost(host) {
		return nil
	}
	return refusal{fmt.Errorf("refusing to serve on non-loopback address %s without --allow-remote", addr)}
}

func loopbackHost(host string) bool {
	if host == "" {
		return false // every interface
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	if host == "localhost" {
		return true
	}
	addrs, err := net.LookupHost(host)
	if err != nil || len(addrs) == 0 {
		return false
	}
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() {
			return false
		}
	}
	return true
}

// loadTokens returns the bearer tokens: the non-empty lines of file, or, without one, a
// new token written 0600 to home/serve-token (and announced on stderr).
func loadTokens(file, home string, stderr io.Writer) ([]string, error) {
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, usageError{fmt.Errorf("--token-file: %w", err)}
		}
		var tokens []string
		for _, line := range strings.Split(string(data), "\n") {
			if t := strings.TrimSpace(line); t != "" {
				tokens = append(tokens, t)
			}
		}
		if len(tokens) == 0 {
			return nil, usageError{fmt.Errorf("--token-file %s: no token in it (one per line)", file)}
		}
		return tokens, nil
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	token := base64.RawURLEncoding.EncodeToString(raw[:])
	path := filepath.Join(home, bashsandbox.ServeTokenName)
	if err := writePrivate(path, token+"\n"); err != nil {
		return nil, fmt.Errorf("writing the bearer token: %w", err)
	}
	fmt.Fprintf(stderr, "dsh: generated a bearer token in %s (clients send \"Authorization: Bearer <token>\"; --token-file sets your own)\n", path)
	return []string{token}, nil
}

// writePrivate replaces path with data, readable by its owner only, atomically.
func writePrivate(path, data string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".serve-token-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// httpFront serves /mcp: bearer-token authentication, then each request on the lane its
// protocol revision asks for — the stateless lane (2026-07-28: the token's principal is
// the harness session) or the session lane (every MCP session is a harness session) —
// within the session limit.
type httpFront struct {
	b        *bridge
	opts     httpOptions
	log      *slog.Logger
	tokens   [][32]byte // SHA-256 of each token
	ids      []string   // principal id of each token
	keys     [][]byte   // request-state key of each token
	sessions *scope     // the session lane's server
	legacy   *mcp.StreamableHTTPHandler
	modern   *mcp.StreamableHTTPHandler

	createMu sync.Mutex // serializes session creation against the limit

	mu         sync.Mutex
	principals map[string]*principal
}

type principalKey struct{}

func newHTTPFront(b *bridge, tokens []string, opts httpOptions, log *slog.Logger) *httpFront {
	f := &httpFront{b: b, opts: opts, log: log, principals: map[string]*principal{}}
	for _, t := range tokens {
		f.tokens = append(f.tokens, sha256.Sum256([]byte(t)))
		id := sha256.Sum256([]byte("dsh principal\x00" + t))
		f.ids = append(f.ids, hex.EncodeToString(id[:8]))
		key := hmac.New(sha256.New, []byte(t))
		key.Write([]byte("dsh request state"))
		f.keys = append(f.keys, key.Sum(nil))
	}
	f.sessions = b.newScope(nil, sessionProtocolVersions)
	f.legacy = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.sessions.server },
		&mcp.StreamableHTTPOptions{Logger: b.sdkLog, SessionTimeout: opts.sessionTimeout})
	f.modern = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if p, ok := r.Context().Value(principalKey{}).(*principal); ok {
			return p.scope.server
		}
		return nil
	}, &mcp.StreamableHTTPOptions{Logger: b.sdkLog, Stateless: true, PropagateRequestCancellation: true})
	return f
}

// handler is the whole HTTP surface: /mcp behind the bearer token, 404 elsewhere.
func (f *httpFront) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(mcpPath, f.authenticate(http.HandlerFunc(f.route)))
	return mux
}

// authenticate answers 401 with WWW-Authenticate: Bearer unless the request carries one
// of the tokens (compared in constant time, against every token), and hands the SDK the
// token's principal as the TokenInfo user (the session lane then refuses a session to
// any other principal).
func (f *httpFront) authenticate(next http.Handler) http.Handler {
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if i := f.match(token); i >= 0 {
			return &auth.TokenInfo{UserID: f.ids[i], Expiration: time.Now().Add(24 * time.Hour)}, nil
		}
		return nil, auth.ErrInvalidToken
	}
	sdk := auth.RequireBearerToken(verify, nil)(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") || f.match(strings.TrimSpace(token)) < 0 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "unauthorized: this endpoint needs Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		sdk.ServeHTTP(w, r)
	})
}

// match returns the index of token among the configured ones, or -1. Every token is
// compared, in constant time.
func (f *httpFront) match(token string) int {
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i, t := range f.tokens {
		if subtle.ConstantTimeCompare(sum[:], t[:]) == 1 {
			found = i
		}
	}
	return found
}

func (f *httpFront) principalIndex(r *http.Request) int {
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		for i, id := range f.ids {
			if id == ti.UserID {
				return i
			}
		}
	}
	return -1
}

// route sends each request to its lane. A request is stateless-lane when its
// Mcp-Protocol-Version header or its _meta names the 2026-07-28 revision (or later).
func (f *httpFront) route(w http.ResponseWriter, r *http.Request) {
	modern, err := modernRequest(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if modern {
		f.serveModern(w, r)
		return
	}
	if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
		// A new session (or a sessionless request, which the SDK answers at once).
		f.createMu.Lock()
		if n := f.count(); n >= f.opts.maxSessions {
			f.createMu.Unlock()
			f.refuse(w)
			return
		}
		defer f.createMu.Unlock()
	}
	f.legacy.ServeHTTP(w, r)
}

// count is the number of harness sessions HTTP clients hold: session-lane MCP sessions
// and stateless principals.
func (f *httpFront) count() int {
	f.mu.Lock()
	n := len(f.principals)
	f.mu.Unlock()
	return n + f.b.sessionCount(f.sessions)
}

func (f *httpFront) refuse(w http.ResponseWriter) {
	f.log.Warn("session refused: the session limit is reached", "maxSessions", f.opts.maxSessions)
	http.Error(w, fmt.Sprintf("session limit reached: %d sessions are open in this harness (--max-sessions)", f.opts.maxSessions), http.StatusServiceUnavailable)
}

func (f *httpFront) serveModern(w http.ResponseWriter, r *http.Request) {
	i := f.principalIndex(r)
	if i < 0 {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	p := f.acquire(i)
	if p == nil {
		f.refuse(w)
		return
	}
	defer f.release(p)
	f.modern.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
}

// acquire returns the live principal of token i, creating it (and its harness session)
// unless that would exceed the session limit; it holds it until release.
func (f *httpFront) acquire(i int) *principal {
	id := f.ids[i]
	f.mu.Lock()
	p := f.principals[id]
	if p == nil {
		f.mu.Unlock()
		f.createMu.Lock()
		defer f.createMu.Unlock()
		f.mu.Lock()
		if p = f.principals[id]; p == nil {
			if len(f.principals)+f.b.sessionCount(f.sessions) >= f.opts.maxSessions {
				f.mu.Unlock()
				return nil
			}
			p = f.newPrincipal(id, f.keys[i])
			f.principals[id] = p
		}
	}
	p.refs++
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	f.mu.Unlock()
	return p
}

// release ends a request of p; when none is left, p's idle timer starts: after
// --session-timeout without a request its harness session ends (jobs included).
func (f *httpFront) release(p *principal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p.refs--
	if p.refs > 0 || f.opts.sessionTimeout <= 0 {
		return
	}
	p.timer = time.AfterFunc(f.opts.sessionTimeout, func() { f.expire(p) })
}

func (f *httpFront) expire(p *principal) {
	f.mu.Lock()
	if p.refs > 0 || p.gone {
		f.mu.Unlock()
		return
	}
	p.gone = true
	delete(f.principals, p.id)
	f.mu.Unlock()
	f.log.Info("principal session ended after idle timeout", "session", p.session.ID)
	f.b.dropScope(p.scope)
	f.b.rt.EndSession(p.session.ID)
}

// newPrincipal creates the harness session of a principal: its id (DSH_SESSION_ID) is
// derived from the token, so it is the same across restarts and replicas.
func (f *httpFront) newPrincipal(id string, key []byte) *principal {
	s := f.b.newSession()
	s.ID = id
	p := &principal{id: id, session: s, notices: &noticeLog{}, stateKey: key}
	s.Notifier = principalNotifier{p}
	f.b.newScope(p, allProtocolVersions)
	return p
}

// shutdown ends every harness session of the HTTP clients.
func (f *httpFront) shutdown() {
	f.b.closeSessions(f.sessions)
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
		f.b.rt.EndSession(p.session.ID)
	}
}

// modernRequest reports whether r uses the stateless revision: by its
// Mcp-Protocol-Version header, else by the _meta of the JSON-RPC request in its body
// (which is left in place for the handler).
func modernRequest(r *http.Request) (bool, error) {
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
		return isModern(v), nil
	}
	if r.Method != http.MethodPost || r.Body == nil {
		return false, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return false, fmt.Errorf("reading the request body: %w", err)
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	var msg struct {
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return false, nil // not one JSON-RPC object: the session lane answers it
	}
	v, _ := msg.Params.Meta[mcp.MetaKeyProtocolVersion].(string)
	return isModern(v), nil
}

// serveHTTP serves the bridge over streamable HTTP at /mcp until ctx ends.
func serveHTTP(ctx context.Context, b *bridge, tokens []string, opts httpOptions, stderr io.Writer, log *slog.Logger) error {
	ln, err := net.Listen("tcp", opts.addr)
	if err != nil {
		return fmt.Errorf("--http %q: %w", opts.addr, err)
	}
	f := newHTTPFront(b, tokens, opts, log)
	reqCtx, cancelRequests := context.WithCancel(context.Background())
	defer cancelRequests()
	srv := &http.Server{
		Handler:           f.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	fmt.Fprintf(stderr, "dsh: serving MCP (streamable HTTP) on http://%s%s\n", ln.Addr(), mcpPath)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// End the sessions and the open streams first: a client holding a stream open would
	// otherwise keep Shutdown waiting.
	f.shutdown()
	cancelRequests()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Debug("http shutdown", "err", err)
	}
	<-errc
	return nil
}

// dshHome is the harness home: the shell-env service's, else $DSH_HOME, else ~/.dsh.
func dshHome(rt *container.Runtime) string {
	if env, ok := container.Lookup[*shellenv.Registry](rt, shellenv.Service); ok && env.Home() != "" {
		return env.Home()
	}
	return shellenv.DefaultConfig().DshHome
}
