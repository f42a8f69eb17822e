package mcpserve

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// reloadWait bounds how long a call waits for a reload in progress.
const reloadWait = 30 * time.Second

// callTool runs a call through the live registry: text content = the rendered text,
// isError = the result's, structured content = the typed value. A call carrying a
// progress token gets progress notifications while it runs. A stateless-lane call that
// needs the user's approval returns input_required and is decided when the client
// retries with the answer. A call in flight ends (aborted) when its scope's serving ends.
func (s *Server) callTool(ctx context.Context, sc *scope, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(sc.base, cancel)
	defer stop()
	ctx = tools.WithTraceContext(ctx, traceContextOf(req))

	session, asker, err := s.callSession(sc, req)
	if err != nil {
		return nil, err
	}
	if token := req.Params.GetProgressToken(); token != nil {
		meter := &tools.Meter{}
		ctx = tools.WithMeter(ctx, meter)
		done := reportProgress(ctx, req.Session, token, meter)
		defer done()
	}

	var res tools.Result
	if reg := s.registryWith(ctx, req.Params.Name); reg == nil {
		res = tools.Errorf("no tools registry is composed")
	} else {
		res = reg.Call(ctx, req.Params.Name, req.Params.Arguments, session)
	}
	if asker != nil && asker.question != "" {
		return asker.inputRequired(), nil
	}
	out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Text}}, IsError: res.IsError}
	if res.Value != nil {
		out.StructuredContent = res.Value
	}
	return out, nil
}

// callSession is the harness session a call runs in. On the stateless lane it is a copy
// with a prompter of the call's own: the revision forbids server-initiated elicitation,
// so approval questions travel in the result (input_required) instead.
func (s *Server) callSession(sc *scope, req *mcp.CallToolRequest) (*container.Session, *inputAsker, error) {
	session := s.session(sc, req)
	if !isStateless(req.ProtocolVersion()) {
		return session, nil, nil
	}
	own := *session
	own.Prompter = nil
	var asker *inputAsker
	if caps := req.ClientCapabilities(); caps != nil && caps.Elicitation != nil {
		var err error
		if asker, err = s.newAsker(sc, session, req); err != nil {
			return nil, nil, err
		}
		own.Prompter = asker
	}
	return &own, asker, nil
}

// registryWith returns the live tools registry. When it (or the named tool) is missing
// while a reload is in progress — an executor restart briefly unloads the bash tool —
// it waits (as long as the call may) for the reload to finish rather than failing.
func (s *Server) registryWith(ctx context.Context, tool string) *tools.Registry {
	reg, ok := container.Lookup(s.rt, tools.Service)
	if ok {
		if _, found := reg.Tool(tool); found {
			return reg
		}
	}
	wait, cancel := context.WithTimeout(ctx, reloadWait)
	defer cancel()
	if s.rt.WaitIdle(wait) {
		reg, _ = container.Lookup(s.rt, tools.Service)
	}
	return reg
}
