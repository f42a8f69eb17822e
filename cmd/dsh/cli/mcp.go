package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/prompt"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// statusURI is the MCP resource serving the live composition status.
const statusURI = "dsh://status"

// sessionProtocolVersions are the MCP revisions dsh serves: those with sessions.
var sessionProtocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// mcpBridge serves a runtime's live `tools` registry and `systemPrompt` over MCP. Every
// MCP session is one harness session.
type mcpBridge struct {
	base       context.Context // cancelled at shutdown: ends every call in flight
	rt         *container.Runtime
	newSession func(workspace string) (*container.Session, error)
	workspace  string
	server     *mcp.Server
	log        *slog.Logger

	mu       sync.Mutex
	sessions map[*mcp.ServerSession]*container.Session

	syncMu sync.Mutex
	served map[string]tools.Tool // tool definitions currently on the server
	stop   func()
}

func newMCPBridge(base context.Context, rt *container.Runtime, newSession func(string) (*container.Session, error), workspace, version string, log *slog.Logger) *mcpBridge {
	b := &mcpBridge{base: base, rt: rt, newSession: newSession, workspace: workspace, log: log,
		sessions: map[*mcp.ServerSession]*container.Session{}, served: map[string]tools.Tool{}}
	b.server = mcp.NewServer(&mcp.Implementation{Name: "dsh", Version: version}, &mcp.ServerOptions{
		Logger:             log,
		InitializedHandler: b.initialized,
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		// dsh is session-based (jobs, approval and notices belong to a session), so it
		// speaks the protocol revisions with the initialize handshake; newer clients fall
		// back to it.
		SupportedProtocolVersions: sessionProtocolVersions,
		Capabilities: &mcp.ServerCapabilities{
			Logging: &mcp.LoggingCapabilities{},
			Tools:   &mcp.ToolCapabilities{ListChanged: true},
		},
	})
	b.server.AddReceivingMiddleware(b.middleware)
	b.server.AddResource(&mcp.Resource{
		URI: statusURI, Name: "status", MIMEType: "application/json",
		Description: "Live state of every profile row: state, missing services, providers, errors, and the last reload error.",
	}, b.readStatus)
	b.sync()
	b.stop = rt.Subscribe(b.sync)
	return b
}

// close detaches the bridge from the runtime.
func (b *mcpBridge) close() { b.stop() }

// middleware fills the initialize result with the composed prompt of the moment (it
// changes with hot reload) and turns on info-level logging so job notices reach the
// client even if it never sets a level.
func (b *mcpBridge) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "initialize" || err != nil {
			return res, err
		}
		if ir, ok := res.(*mcp.InitializeResult); ok {
			ss, _ := req.GetSession().(*mcp.ServerSession)
			ir.Instructions = b.instructions(b.session(ss))
			if ss != nil {
				_, _ = next(ctx, "logging/setLevel", &mcp.ServerRequest[*mcp.SetLoggingLevelParams]{Session: ss, Params: &mcp.SetLoggingLevelParams{Level: "info"}})
			}
		}
		return res, err
	}
}

func (b *mcpBridge) instructions(s *container.Session) string {
	v, ok := b.rt.Lookup(prompt.Service)
	if !ok {
		return ""
	}
	reg, ok := v.(*prompt.Registry)
	if !ok {
		return ""
	}
	return reg.Compose(s)
}

// initialized creates the harness session as soon as the MCP session is live.
func (b *mcpBridge) initialized(_ context.Context, req *mcp.InitializedRequest) {
	b.session(req.Session)
}

// session returns the harness session of an MCP session, creating it on first use
// (initialize, or the first call of a client that skips notifications/initialized).
// The harness session ends — its jobs cancelled, awaited and deleted — when the MCP
// session goes away.
func (b *mcpBridge) session(ss *mcp.ServerSession) *container.Session {
	if ss == nil {
		s, _ := b.newSession(b.workspace) // the flags were checked before serving
		return s
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.sessions[ss]; ok {
		return s
	}
	s, _ := b.newSession(b.workspace)
	s.Notifier = logNotifier{ss}
	if p := ss.InitializeParams(); p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil {
		s.Prompter = elicitPrompter{ss}
	}
	b.sessions[ss] = s
	go func() {
		_ = ss.Wait()
		b.mu.Lock()
		delete(b.sessions, ss)
		b.mu.Unlock()
		b.rt.EndSession(s.ID)
	}()
	return s
}

// closeSessions ends every MCP session (and so every harness session).
func (b *mcpBridge) closeSessions() {
	b.mu.Lock()
	sessions := make([]*mcp.ServerSession, 0, len(b.sessions))
	for ss := range b.sessions {
		sessions = append(sessions, ss)
	}
	b.mu.Unlock()
	for _, ss := range sessions {
		_ = ss.Close()
	}
}

func newSessionID() string {
	var buf [8]byte
	_, _ = rand.Read(buf[:])
	return hex.EncodeToString(buf[:])
}

// sync makes the server's tool list match the live registry; the SDK sends
// tools/list_changed when it changes. Syncs are serialized; none holds the session lock.
func (b *mcpBridge) sync() {
	b.syncMu.Lock()
	defer b.syncMu.Unlock()
	live := map[string]tools.Tool{}
	if reg, ok := container.LookupService[*tools.Registry](b.rt, tools.Service); ok {
		for _, t := range reg.Tools() {
			live[t.Name] = t
		}
	}
	var removed []string
	for name := range b.served {
		if _, ok := live[name]; !ok {
			removed = append(removed, name)
			delete(b.served, name)
		}
	}
	if len(removed) > 0 {
		b.server.RemoveTools(removed...)
	}
	for name, t := range live {
		if old, ok := b.served[name]; ok && old.Description == t.Description && reflect.DeepEqual(old.InputSchema, t.InputSchema) {
			continue
		}
		if b.addTool(t) {
			b.served[name] = t
		}
	}
	// Subscribed clients are told in the background: a slow client must not hold up the
	// reload that triggered this sync.
	go func() {
		if err := b.server.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: statusURI}); err != nil {
			b.log.Debug("status resource update not sent", "err", err)
		}
	}()
}

// addTool serves t; a definition the SDK refuses is logged and left out, never fatal.
func (b *mcpBridge) addTool(t tools.Tool) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			b.log.Error("tool not served over MCP", "tool", t.Name, "err", fmt.Sprint(p))
			ok = false
		}
	}()
	b.server.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}, b.callTool)
	return true
}

// callTool runs a call through the live registry: text content = the rendered text,
// isError = the result's, structured content = the typed value. A call in flight ends
// (aborted) when the server shuts down.
func (b *mcpBridge) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(b.base, cancel)
	defer stop()

	reg := b.registryWith(ctx, req.Params.Name)
	var res tools.Result
	if reg == nil {
		res = tools.Errorf("no tools registry is composed")
	} else {
		res = reg.Call(ctx, req.Params.Name, req.Params.Arguments, b.session(req.Session))
	}
	out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Text}}, IsError: res.IsError}
	if res.Value != nil {
		out.StructuredContent = res.Value
	}
	return out, nil
}

// registryWith returns the live tools registry. When it (or the named tool) is missing
// while a reload is in progress — an executor restart briefly unloads the bash tool —
// it waits (as long as the call may) for the reload to finish rather than failing.
func (b *mcpBridge) registryWith(ctx context.Context, tool string) *tools.Registry {
	reg, ok := container.LookupService[*tools.Registry](b.rt, tools.Service)
	if ok {
		if _, found := reg.Tool(tool); found {
			return reg
		}
	}
	wait, cancel := context.WithTimeout(ctx, reloadWait)
	defer cancel()
	if b.rt.WaitIdle(wait) {
		reg, _ = container.LookupService[*tools.Registry](b.rt, tools.Service)
	}
	return reg
}

// reloadWait bounds how long a call waits for a reload in progress.
const reloadWait = 30 * time.Second

func (b *mcpBridge) readStatus(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	data, err := json.MarshalIndent(publicStatus(b.rt.Status()), "", "  ")
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: statusURI, MIMEType: "application/json", Text: string(data)}}}, nil
}

// logNotifier delivers notices as MCP log notifications (logger dsh.jobs, level info).
type logNotifier struct{ ss *mcp.ServerSession }

// Notify sends in the background with a deadline: a client that stops reading must not
// hold up the job runtime that reports the completion.
func (n logNotifier) Notify(text string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		defer cancel()
		_ = n.ss.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "dsh.jobs", Data: text})
	}()
}

// notifyTimeout bounds the delivery of one notice.
const notifyTimeout = 10 * time.Second

// elicitPrompter asks through MCP form elicitation with an empty schema.
type elicitPrompter struct{ ss *mcp.ServerSession }

func (p elicitPrompter) Confirm(ctx context.Context, message string) (container.Answer, error) {
	res, err := p.ss.Elicit(ctx, &mcp.ElicitParams{
		Mode:            "form",
		Message:         message,
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}},
	})
	if err != nil {
		return "", err
	}
	switch res.Action {
	case "accept":
		return container.Accepted, nil
	case "decline":
		return container.Declined, nil
	case "cancel":
		return container.Cancelled, nil
	}
	return "", errors.New("elicitation: unknown action " + res.Action)
}
