package mcpserve

import (
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/container"
)

// session returns the harness session req belongs to: the principal's, or its MCP
// session's own, created on first use (initialize or discover, or the first call of a
// client that skips notifications/initialized) with the role of the request's bearer
// token. The SDK binds an MCP session to the principal that created it, so that role is
// the session's for good. An MCP session's harness session ends — its jobs cancelled,
// awaited and deleted — when the MCP session goes away.
func (s *Server) session(sc *scope, req mcp.Request) *container.Session {
	if sc.principal != nil {
		return sc.principal.session
	}
	ss, _ := req.GetSession().(*mcp.ServerSession)
	if ss == nil {
		return s.freshSession(req.GetExtra())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if session, ok := s.sessions[ss]; ok {
		return session
	}
	session := s.freshSession(req.GetExtra())
	log := &noticeLog{}
	session.Notifier = sessionNotifier{sc: sc, ss: ss, log: log}
	if p := ss.InitializeParams(); p != nil && !isStateless(p.ProtocolVersion) && p.Capabilities != nil && p.Capabilities.Elicitation != nil {
		session.Prompter = elicitPrompter{ss: ss, timeout: s.approvalTimeout, log: s.log}
	}
	s.sessions[ss] = session
	s.notices[session.ID] = log
	ended := make(chan struct{})
	s.ended.Store(ss, ended)
	go func() {
		defer close(ended)
		s.endWith(ss, session)
	}()
	return session
}

// awaitEnd waits until the harness session of ss, if it has one, has ended.
func (s *Server) awaitEnd(ss *mcp.ServerSession) {
	if ended, ok := s.ended.Load(ss); ok {
		<-ended.(chan struct{})
	}
}

// freshSession is a new harness session for a request carrying extra: its token's role
// (HTTPOptions.Roles), if it has one, replaces NewSession's.
func (s *Server) freshSession(extra *mcp.RequestExtra) *container.Session {
	session := s.newSession()
	if extra != nil {
		if role := tokenRole(extra.TokenInfo); role != "" {
			session.Role = role
		}
	}
	return session
}

// roleKey holds a token's role in the TokenInfo the authentication hands the SDK.
const roleKey = "dev.dsh/role"

// tokenRole is the role of the token ti describes ("" for none).
func tokenRole(ti *auth.TokenInfo) string {
	if ti == nil {
		return ""
	}
	role, _ := ti.Extra[roleKey].(string)
	return role
}

// endWith ends session once its MCP session ss has gone away.
func (s *Server) endWith(ss *mcp.ServerSession, session *container.Session) {
	_ = ss.Wait()
	defer s.ended.Delete(ss)
	s.mu.Lock()
	delete(s.sessions, ss)
	delete(s.notices, session.ID)
	s.mu.Unlock()
	s.forgetView(session)
	s.rt.EndSession(session.ID)
}

// sessionCount is the number of MCP sessions connected to sc.
func (sc *scope) sessionCount() int {
	n := 0
	for range sc.server.Sessions() {
		n++
	}
	return n
}

// closeSessions ends every MCP session of sc (and so every harness session).
func (sc *scope) closeSessions() {
	for ss := range sc.server.Sessions() {
		_ = ss.Close()
	}
}
