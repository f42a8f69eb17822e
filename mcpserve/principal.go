package mcpserve

import (
	"context"
	"net/http"
	"time"

	"github.com/dsh-dev/dsh/container"
)

// principal is an authenticated client identity of the stateless lane (one bearer
// token): one harness session across all its requests and connections.
type principal struct {
	id       string
	session  *container.Session
	notices  *noticeLog
	stateKey []byte // derived from the token: every replica sharing it verifies it
	scope    *scope

	// guarded by the HTTP front's lock
	refs  int // requests in flight
	timer *time.Timer
	gone  bool
}

// serveStateless serves a stateless-lane request as its principal.
func (f *httpFront) serveStateless(w http.ResponseWriter, r *http.Request) {
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
	f.statelessLane.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
}

// acquire returns the live principal of token i, creating it (and its harness session)
// unless that would exceed the session limit; it holds it until release.
func (f *httpFront) acquire(i int) *principal {
	id := f.auth.ids[i]
	f.mu.Lock()
	p := f.principals[id]
	if p == nil {
		f.mu.Unlock()
		f.createMu.Lock()
		defer f.createMu.Unlock()
		f.mu.Lock()
		if p = f.principals[id]; p == nil {
			if len(f.principals)+f.sessions.sessionCount() >= f.s.http.maxSessions() {
				f.mu.Unlock()
				return nil
			}
			p = f.newPrincipal(id, f.auth.keys[i], f.auth.roles[i])
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

// release ends a request of p; when none is left, p's idle timer starts: after the
// session timeout without a request its harness session ends (jobs included).
func (f *httpFront) release(p *principal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p.refs--
	if p.refs > 0 || f.s.http.SessionTimeout <= 0 {
		return
	}
	p.timer = time.AfterFunc(f.s.http.SessionTimeout, func() { f.expire(p) })
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
	f.s.log.Info("principal session ended after idle timeout", "session", p.session.ID)
	f.s.dropScope(p.scope)
	f.s.rt.EndSession(p.session.ID)
}

// newPrincipal creates the harness session of a principal: its id (DSH_SESSION_ID) is
// derived from the token, so it is the same across restarts and replicas; its role is
// the token's, if it has one.
func (f *httpFront) newPrincipal(id string, key []byte, role string) *principal {
	s := f.s.newSession()
	s.ID = id
	if role != "" {
		s.Role = role
	}
	p := &principal{id: id, session: s, notices: &noticeLog{}, stateKey: key}
	s.Notifier = principalNotifier{p}
	f.s.newScope(f.base, p, allProtocolVersions)
	return p
}
