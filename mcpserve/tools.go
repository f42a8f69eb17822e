package mcpserve

import (
	"bytes"
	"context"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// sync makes the servers' tool lists match the live registry; the SDK sends
// tools/list_changed when they change, and so does a scope one of whose sessions would
// now see other tools (views.go). Syncs are serialized; none holds the session lock.
func (s *Server) sync() {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	live := s.liveTools()
	scopes := s.scopeList()
	s.removeGone(scopes, live)
	s.addChanged(scopes, live)
	for _, sc := range s.viewsChanged(scopes) {
		s.tellListChanged(sc)
	}
	// Subscribed clients are told in the background: a slow client must not hold up the
	// reload that triggered this sync.
	go s.announceStatus(scopes)
}

// liveTools are the tools of the live registry, by name.
func (s *Server) liveTools() map[string]tools.Tool {
	live := map[string]tools.Tool{}
	if reg, ok := container.Lookup(s.rt, tools.Service); ok {
		for _, t := range reg.Tools() {
			live[t.Name] = t
		}
	}
	return live
}

func (s *Server) scopeList() []*scope {
	s.mu.Lock()
	defer s.mu.Unlock()
	scopes := make([]*scope, 0, len(s.scopes))
	for sc := range s.scopes {
		scopes = append(scopes, sc)
	}
	return scopes
}

// removeGone takes the served tools that are no longer live off every server.
func (s *Server) removeGone(scopes []*scope, live map[string]tools.Tool) {
	var removed []string
	for name := range s.served {
		if _, ok := live[name]; !ok {
			removed = append(removed, name)
			delete(s.served, name)
		}
	}
	if len(removed) == 0 {
		return
	}
	for _, sc := range scopes {
		sc.server.RemoveTools(removed...)
	}
	for _, name := range removed { // after: a listing meanwhile still shows its own
		s.defs.Delete(name)
	}
}

// addChanged serves every live tool that is new or whose definition changed.
func (s *Server) addChanged(scopes []*scope, live map[string]tools.Tool) {
	for name, t := range live {
		if old, ok := s.served[name]; ok && old.Description == t.Description && reflect.DeepEqual(old.InputSchema, t.InputSchema) && bytes.Equal(old.OutputSchema, t.OutputSchema) {
			continue
		}
		def := definition(t)
		s.defs.Store(name, def)
		ok := true
		for _, sc := range scopes {
			ok = s.addTool(sc, def) && ok
		}
		if ok {
			s.served[name] = t
		}
	}
}

// definition is t's MCP definition. The output schema is served as the tool encoded
// it; a nil one stays out (a nil json.RawMessage in the field's interface would not).
func definition(t tools.Tool) *mcp.Tool {
	def := &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
	if t.OutputSchema != nil {
		def.OutputSchema = t.OutputSchema
	}
	return def
}

// standIn is the schema the SDK's servers are given in place of a tool's own: a
// tools/list shows the tool's own (listFor), and the SDK does not validate a raw
// handler's arguments. Given a schema that is not a *jsonschema.Schema, the SDK encodes
// and decodes it at each AddTool, twice, to check it: about 0.9 ms of CPU in a server's
// start, before its first answer, for dsh's built-in tools (perf, 60 cold starts). The
// registry has checked them.
var standIn = &jsonschema.Schema{Type: "object"}

// addTool serves def on sc, with standIn for its schemas; a definition the SDK refuses
// is logged and left out, never fatal.
func (s *Server) addTool(sc *scope, def *mcp.Tool) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("tool not served over MCP", "tool", def.Name, "err", fmt.Sprint(p))
			ok = false
		}
	}()
	own := *def // each server gets its own copy
	own.InputSchema = standIn
	if own.OutputSchema != nil {
		own.OutputSchema = standIn
	}
	sc.server.AddTool(&own, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return s.callTool(ctx, sc, req)
	})
	return true
}
