package mcpserve

import (
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// What a session sees. Every scope's *mcp.Server serves every tool of the registry (a
// call of a tool the session may not see reaches the registry, which refuses it with
// the policy's words); a session's tools/list is narrowed to the registry's ToolsFor
// that session: its role's tools, each shaped for it (bash without the modes above the
// role's ceiling). One server per role would not do: the session lane has one server
// for all its sessions, a role is only one input of ToolsFor, and a role's tools change
// with a reload without the tool set changing.
//
// When a composition change alters what a session that has listed the tools would list
// now, its scope's server is told that its tool list changed (the SDK then sends
// notifications/tools/list_changed, or delivers it on subscriptions/listen). The SDK
// tells every session of a server, so on the session lane the other sessions hear it
// too: they re-list and find their lists unchanged.

// viewTool is one tool of a session's view, as far as its definition goes.
type viewTool struct {
	name, description string
	schema            *tools.Schema
}

// listFor narrows res (a page of the server's tools) to what session sees, with each
// tool's own definition (shownDef): a tool hidden from it is left out, a shaped one
// replaced by its shape. A tool the registry
// lacks for the moment (a reload in progress) stays as served. The result is marked
// private to the client when what it lists may depend on the session.
func (s *Server) listFor(session *container.Session, res *mcp.ListToolsResult) *mcp.ListToolsResult {
	reg, ok := container.Lookup(s.rt, tools.Service)
	if !ok {
		return res
	}
	s.listing(session)
	visible := reg.ToolsFor(session)
	s.rememberView(session, visible)
	seen := make(map[string]tools.Tool, len(visible))
	for _, t := range visible {
		seen[t.Name] = t
	}
	changed := false
	list := make([]*mcp.Tool, 0, len(res.Tools))
	for _, def := range res.Tools {
		def = s.shownDef(def)
		t, ok := seen[def.Name]
		switch {
		case !ok:
			if _, registered := reg.Tool(def.Name); registered {
				changed = true // hidden from this session
				continue
			}
		case t.Description != def.Description || !sameSchema(def.InputSchema, t.InputSchema):
			own := *def
			own.Description, own.InputSchema = t.Description, t.InputSchema
			def, changed = &own, true
		}
		list = append(list, def)
	}
	out := *res
	out.Tools = list
	if changed || reg.Restricted() {
		out.CacheScope = "private"
	}
	return &out
}

// shownDef is the definition a tools/list shows for def, one of a server's tools (which
// holds standIn for its schemas).
func (s *Server) shownDef(def *mcp.Tool) *mcp.Tool {
	if d := s.def(def.Name); d != nil {
		return d
	}
	return def
}

// def is the MCP definition of the served tool name; nil for none.
func (s *Server) def(name string) *mcp.Tool {
	d, _ := s.defs.Load(name)
	def, _ := d.(*mcp.Tool)
	return def
}

// listing marks session as listing its tools before its view is computed: a sync that
// runs meanwhile, on a registry this listing may not have seen, then tells it.
func (s *Server) listing(session *container.Session) {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	if s.views == nil {
		s.views = map[*container.Session][]viewTool{}
	}
	if _, ok := s.views[session]; !ok {
		s.views[session] = []viewTool{{name: "\x00listing"}}
	}
}

// rememberView records what session was last shown.
func (s *Server) rememberView(session *container.Session, visible []tools.Tool) {
	view := make([]viewTool, len(visible))
	for i, t := range visible {
		view[i] = viewTool{t.Name, t.Description, t.InputSchema}
	}
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	if s.views == nil {
		s.views = map[*container.Session][]viewTool{}
	}
	s.views[session] = view
}

// forgetView drops what is remembered of an ended session.
func (s *Server) forgetView(session *container.Session) {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	delete(s.views, session)
}

// viewsChanged returns the scopes one of whose sessions would now list other tools than
// it was last shown, and remembers what they would list.
func (s *Server) viewsChanged(scopes []*scope) []*scope {
	reg, ok := container.Lookup(s.rt, tools.Service)
	if !ok {
		return nil
	}
	var changed []*scope
	for _, sc := range scopes {
		for _, session := range s.scopeSessions(sc) {
			s.viewMu.Lock()
			last, listed := s.views[session]
			s.viewMu.Unlock()
			if !listed {
				continue
			}
			now := reg.ToolsFor(session)
			if sameView(last, now) {
				continue
			}
			s.rememberView(session, now)
			if len(changed) == 0 || changed[len(changed)-1] != sc {
				changed = append(changed, sc)
			}
		}
	}
	return changed
}

// scopeSessions are the harness sessions of sc: its principal's, or its MCP sessions'.
func (s *Server) scopeSessions(sc *scope) []*container.Session {
	if sc.principal != nil {
		return []*container.Session{sc.principal.session}
	}
	var conns []*mcp.ServerSession
	for ss := range sc.server.Sessions() {
		conns = append(conns, ss)
	}
	out := make([]*container.Session, 0, len(conns))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range conns {
		if session, ok := s.sessions[ss]; ok {
			out = append(out, session)
		}
	}
	return out
}

// sameView reports whether now shows the tools last showed, definitions included.
func sameView(last []viewTool, now []tools.Tool) bool {
	if len(last) != len(now) {
		return false
	}
	for i, t := range now {
		v := last[i]
		if v.name != t.Name || v.description != t.Description {
			return false
		}
		if !sameSchema(v.schema, t.InputSchema) {
			return false
		}
	}
	return true
}

// sameSchema reports whether served (a definition's input schema) is schema: the same
// pointer, or equal (a tool registered again with the same definition).
func sameSchema(served any, schema *tools.Schema) bool {
	if served == any(schema) {
		return true
	}
	old, ok := served.(*tools.Schema)
	return ok && old != nil && schema != nil && reflect.DeepEqual(*old, *schema)
}

// tellListChanged makes sc's server announce that its tool list changed, by serving one
// of its tools again: the SDK has no other way to send tools/list_changed.
func (s *Server) tellListChanged(sc *scope) {
	for name := range s.served {
		s.addTool(sc, s.def(name))
		return
	}
}
