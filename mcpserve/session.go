package mcpserve

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/container"
)

// session returns the harness session a request of ss belongs to: the principal's, or
// the MCP session's own, created on first use (initialize or discover, or the first call
// of a client that skips notifications/initialized). An MCP session's harness session
// ends — its jobs cancelled, awaited and deleted — when the MCP session goes away.
func (s *Server) session(sc *scope, ss *mcp.ServerSession) *container.Session {
	if sc.principal != nil {
		return sc.principal.session
	}
	if ss == nil {
		return s.newSession()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if session, ok := s.sessions[ss]; ok {
		return session
	}
	session := s.newSession()
	log := &noticeLog{}
	session.Notifier = sessionNotifier{sc: sc, ss: ss, log: log}
	if p := ss.InitializeParams(); p != nil && !isStateless(p.ProtocolVersion) && p.Capabilities != nil && p.Capabilities.Elicitation != nil {
		session.Prompter = elicitPrompter{ss: ss, timeout: s.approvalTimeout, log: s.log}
	}
	s.sessions[ss] = session
	s.notices[session.ID] = log
	go s.endWith(ss, session)
	return session
}

// endWith ends session once its MCP session ss has gone away.
func (s *Server) endWith(ss *mcp.ServerSession, session *container.Session) {
	_ = ss.Wait()
	s.mu.Lock()
	delete(s.sessions, ss)
	delete(s.notices, session.ID)
	s.mu.Unlock()
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
