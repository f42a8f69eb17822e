package mcpserve

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
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
	defer s.ballast.arm()
	if !s.calls.acquire() {
		return s.calls.refusal(), nil
	}
	defer s.calls.release()
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

	var failed *approvalFailure
	if _, asks := session.Prompter.(elicitPrompter); asks {
		failed = &approvalFailure{}
		ctx = context.WithValue(ctx, approvalFailureKey{}, failed)
	}
	var res tools.Result
	if reg := s.registryWith(ctx, req.Params.Name); reg == nil {
		res = tools.Errorf("no tools registry is composed")
	} else {
		res = reg.Call(ctx, req.Params.Name, req.Params.Arguments, session)
	}
	if failed != nil {
		res = failed.result(res)
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

// callLimit bounds the tool calls running at once (Options.MaxCalls).
type callLimit struct {
	max int
	log *slog.Logger

	running atomic.Int64
	refused atomic.Int64 // since the last warning
	warned  atomic.Int64 // when, in Unix nanoseconds
}

func (l *callLimit) acquire() bool {
	if l.running.Add(1) > int64(l.max) {
		l.running.Add(-1)
		return false
	}
	return true
}

func (l *callLimit) release() { l.running.Add(-1) }

// refusal is the answer to a call beyond the limit; a burst of them is logged once a
// minute. The text names dsh's flag: it is what users of `dsh serve` read.
func (l *callLimit) refusal() *mcp.CallToolResult {
	n := l.refused.Add(1)
	now := time.Now().UnixNano()
	if last := l.warned.Load(); now-last >= int64(time.Minute) && l.warned.CompareAndSwap(last, now) {
		l.refused.Add(-n)
		l.log.Warn("tool calls refused: the call limit is reached", "maxCalls", l.max, "refused", n)
	}
	text := fmt.Sprintf("Error: tool call limit reached: %d calls are running in this harness (--max-calls)", l.max)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: true}
}
