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

// MCP resources dsh serves.
const (
	// statusURI is the live composition status (the JSON of `dsh status --json`).
	statusURI = "dsh://status"
	// noticesURI is the calling harness session's job notices, newest last.
	noticesURI = "dsh://notices"
)

// noticeMetaKey carries the notice text in the _meta of the resources/updated
// notification that announces it, so a client need not read the resource to show it.
const noticeMetaKey = "dev.dsh/notice"

// modernRevision is the stateless MCP revision: no initialize, no sessions; per-request
// _meta, server/discover, input_required, subscriptions/listen.
const modernRevision = "2026-07-28"

// sessionProtocolVersions are the revisions with the initialize handshake and sessions.
var sessionProtocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// allProtocolVersions are every revision dsh serves, newest first.
var allProtocolVersions = append([]string{modernRevision}, sessionProtocolVersions...)

// isModern reports whether a negotiated or per-request protocol version is the stateless
// revision (or later).
func isModern(version string) bool { return version >= modernRevision }

// bridge serves a runtime's live `tools` registry, `systemPrompt` and status over MCP,
// through any number of *mcp.Server scopes: one for stdio, one for the session lane of
// HTTP (every MCP session is a harness session), and one per principal of the
// stateless lane (the principal is the harness session).
type bridge struct {
	base       context.Context // cancelled at shutdown: ends every call in flight
	rt         *container.Runtime
	newSession func() *container.Session
	version    string
	log        *slog.Logger // dsh's own
	sdkLog     *slog.Logger // the SDK's, with its chatter filtered
	stateKey   []byte       // signs input_required request states outside a principal

	mu       sync.Mutex
	scopes   map[*scope]struct{}
	sessions map[*mcp.ServerSession]*container.Session
	notices  map[string]*noticeLog // by harness session id

	syncMu sync.Mutex
	served map[string]servedTool // tool definitions currently on the servers
	stop   func()
}

// scope is one *mcp.Server and whom it serves: the principal of a stateless-lane server,
// or (principal nil) the MCP sessions connected to it, each its own harness session.
type scope struct {
	server    *mcp.Server
	principal *principal
}

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

func newBridge(base context.Context, rt *container.Runtime, newSession func() *container.Session, version string, log, sdkLog *slog.Logger) *bridge {
	b := &bridge{base: base, rt: rt, newSession: newSession, version: version, log: log, sdkLog: sdkLog,
		stateKey: randomKey(), scopes: map[*scope]struct{}{}, sessions: map[*mcp.ServerSession]*container.Session{},
		notices: map[string]*noticeLog{}, served: map[string]servedTool{}}
	b.sync()
	b.stop = rt.Subscribe(b.sync)
	return b
}

// close detaches the bridge from the runtime.
func (b *bridge) close() { b.stop() }

// newScope creates a server for p (nil: for MCP sessions) that speaks versions, with
// the tools of the moment.
func (b *bridge) newScope(p *principal, versions []string) *scope {
	sc := &scope{principal: p}
	sc.server = mcp.NewServer(&mcp.Implementation{Name: "dsh", Version: b.version}, &mcp.ServerOptions{
		Logger:                    b.sdkLog,
		InitializedHandler:        func(_ context.Context, req *mcp.InitializedRequest) { b.session(sc, req.Session) },
		SubscribeHandler:          func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler:        func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		SupportedProtocolVersions: versions,
		Capabilities: &mcp.ServerCapabilities{
			Logging: &mcp.LoggingCapabilities{},
			Tools:   &mcp.ToolCapabilities{ListChanged: true},
		},
	})
	sc.server.AddReceivingMiddleware(b.middleware(sc))
	sc.server.AddResource(&mcp.Resource{
		URI: statusURI, Name: "status", MIMEType: "application/json",
		Description: "Live state of every profile row: state, missing services, providers, errors, and the last reload error.",
	}, b.readStatus)
	sc.server.AddResource(&mcp.Resource{
		URI: noticesURI, Name: "notices", MIMEType: "application/json",
		Description: "Your background-job notices ({\"notices\": [{seq, time, text}]}, newest last). Subscribe to it to be told when a job finishes; the update carries the notice text in _meta[\"" + noticeMetaKey + "\"].",
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return b.readNotices(sc, req)
	})
	if p != nil {
		p.scope = sc
	}
	b.syncMu.Lock()
	for _, st := range b.served {
		b.addTool(sc, st.def)
	}
	b.mu.Lock()
	b.scopes[sc] = struct{}{}
	b.mu.Unlock()
	b.syncMu.Unlock()
	return sc
}

// dropScope stops feeding sc's server.
func (b *bridge) dropScope(sc *scope) {
	b.syncMu.Lock()
	defer b.syncMu.Unlock()
	b.mu.Lock()
	delete(b.scopes, sc)
	b.mu.Unlock()
}

// middleware fills the initialize and server/discover results with the composed prompt
// of the moment (it changes with hot reload), and turns on info-level logging for a
// session-lane client, so job notices reach it even if it never sets a level.
func (b *bridge) middleware(sc *scope) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				ensureCallStack()
			}
			res, err := next(ctx, method, req)
			if err != nil {
				return res, err
			}
			ss, _ := req.GetSession().(*mcp.ServerSession)
			switch r := res.(type) {
			case *mcp.InitializeResult:
				r.Instructions = b.instructions(b.session(sc, ss))
				if ss != nil {
					_, _ = next(ctx, "logging/setLevel", &mcp.ServerRequest[*mcp.SetLoggingLevelParams]{Session: ss, Params: &mcp.SetLoggingLevelParams{Level: "info"}})
				}
			case *mcp.DiscoverResult:
				r.Instructions = b.instructions(b.session(sc, ss))
			}
			return res, err
		}
	}
}

func (b *bridge) instructions(s *container.Session) string {
	reg, ok := container.Lookup[*prompt.Registry](b.rt, prompt.Service)
	if !ok {
		return ""
	}
	return reg.Compose(s)
}

// session returns the harness session a request of ss belongs to: the principal's, or
// the MCP session's own, created on first use (initialize or discover, or the first call
// of a client that skips notifications/initialized). An MCP session's harness session
// ends — its jobs cancelled, awaited and deleted — when the MCP session goes away.
func (b *bridge) session(sc *scope, ss *mcp.ServerSession) *container.Session {
	if sc.principal != nil {
		return sc.principal.session
	}
	if ss == nil {
		return b.newSession()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.sessions[ss]; ok {
		return s
	}
	s := b.newSession()
	log := &noticeLog{}
	s.Notifier = sessionNotifier{sc: sc, ss: ss, log: log}
	if p := ss.InitializeParams(); p != nil && !isModern(p.ProtocolVersion) && p.Capabilities != nil && p.Capabilities.Elicitation != nil {
		s.Prompter = elicitPrompter{ss}
	}
	b.sessions[ss] = s
	b.notices[s.ID] = log
	go func() {
		_ = ss.Wait()
		b.mu.Lock()
		delete(b.sessions, ss)
		delete(b.notices, s.ID)
		b.mu.Unlock()
		b.rt.EndSession(s.ID)
	}()
	return s
}

// sessionCount is the number of MCP sessions of sc with a harness session.
func (b *bridge) sessionCount(sc *scope) int {
	n := 0
	for range sc.server.Sessions() {
		n++
	}
	return n
}

// closeSessions ends every MCP session of sc (and so every harness session).
func (b *bridge) closeSessions(sc *scope) {
	for ss := range sc.server.Sessions() {
		_ = ss.Close()
	}
}

func newSessionID() string {
	var buf [8]byte
	_, _ = rand.Read(buf[:])
	return hex.EncodeToString(buf[:])
}

func randomKey() []byte {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return key
}

// sync makes the servers' tool lists match the live registry; the SDK sends
// tools/list_changed when they change. Syncs are serialized; none holds the session lock.
func (b *bridge) sync() {
	b.syncMu.Lock()
	defer b.syncMu.Unlock()
	live := map[string]tools.Tool{}
	if reg, ok := container.Lookup[*tools.Registry](b.rt, tools.Service); ok {
		for _, t := range reg.Tools() {
			live[t.Name] = t
		}
	}
	b.mu.Lock()
	scopes := make([]*scope, 0, len(b.scopes))
	for sc := range b.scopes {
		scopes = append(scopes, sc)
	}
	b.mu.Unlock()
	var removed []string
	for name := range b.served {
		if _, ok := live[name]; !ok {
			removed = append(removed, name)
			delete(b.served, name)
		}
	}
	for _, sc := range scopes {
		if len(removed) > 0 {
			sc.server.RemoveTools(removed...)
		}
	}
	for name, t := range live {
		if old, ok := b.served[name]; ok && old.Description == t.Description && reflect.DeepEqual(old.InputSchema, t.InputSchema) && old.OutputSchema == t.OutputSchema {
			continue
		}
		def, err := definition(t)
		if err != nil {
			b.log.Error("tool not served over MCP: its outputSchema does not encode", "tool", t.Name, "err", err)
			continue
		}
		ok := true
		for _, sc := range scopes {
			ok = b.addTool(sc, def) && ok
		}
		if ok {
			b.served[name] = servedTool{Tool: t, def: def}
		}
	}
	// Subscribed clients are told in the background: a slow client must not hold up the
	// reload that triggered this sync.
	go func() {
		for _, sc := range scopes {
			if err := sc.server.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: statusURI}); err != nil {
				b.log.Debug("status resource update not sent", "err", err)
			}
		}
	}()
}

// servedTool is a tool on the servers, with its MCP definition.
type servedTool struct {
	tools.Tool
	def *mcp.Tool
}

// definition is t's MCP definition. The output schema is encoded here, once per tool
// and not per server or per tools/list: a *jsonschema.Schema takes about 0.16 ms to
// encode.
func definition(t tools.Tool) (*mcp.Tool, error) {
	def := &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
	if t.OutputSchema != nil {
		out, err := json.Marshal(t.OutputSchema)
		if err != nil {
			return nil, err
		}
		def.OutputSchema = json.RawMessage(out)
	}
	return def, nil
}

// addTool serves def on sc; a definition the SDK refuses is logged and left out, never
// fatal.
func (b *bridge) addTool(sc *scope, def *mcp.Tool) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			b.log.Error("tool not served over MCP", "tool", def.Name, "err", fmt.Sprint(p))
			ok = false
		}
	}()
	own := *def // each server gets its own copy
	sc.server.AddTool(&own, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return b.callTool(ctx, sc, req)
	})
	return true
}

// callTool runs a call through the live registry: text content = the rendered text,
// isError = the result's, structured content = the typed value. A call carrying a
// progress token gets progress notifications while it runs. A stateless-lane call that
// needs the user's approval returns input_required and is decided when the client
// retries with the answer. A call in flight ends (aborted) when the server shuts down.
func (b *bridge) callTool(ctx context.Context, sc *scope, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(b.base, cancel)
	defer stop()

	session := b.session(sc, req.Session)
	var asker *inputAsker
	if isModern(req.ProtocolVersion()) {
		// The revision forbids server-initiated elicitation: approval questions travel
		// in the result (input_required) instead, so this call gets its own prompter.
		own := *session
		own.Prompter = nil
		if caps := req.ClientCapabilities(); caps != nil && caps.Elicitation != nil {
			var err error
			if asker, err = b.newAsker(sc, session, req); err != nil {
				return nil, err
			}
			own.Prompter = asker
		}
		session = &own
	}
	if token := req.Params.GetProgressToken(); token != nil {
		meter := &tools.Meter{}
		ctx = tools.WithMeter(ctx, meter)
		done := reportProgress(ctx, req.Session, token, meter)
		defer done()
	}

	reg := b.registryWith(ctx, req.Params.Name)
	var res tools.Result
	if reg == nil {
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

// registryWith returns the live tools registry. When it (or the named tool) is missing
// while a reload is in progress — an executor restart briefly unloads the bash tool —
// it waits (as long as the call may) for the reload to finish rather than failing.
func (b *bridge) registryWith(ctx context.Context, tool string) *tools.Registry {
	reg, ok := container.Lookup[*tools.Registry](b.rt, tools.Service)
	if ok {
		if _, found := reg.Tool(tool); found {
			return reg
		}
	}
	wait, cancel := context.WithTimeout(ctx, reloadWait)
	defer cancel()
	if b.rt.WaitIdle(wait) {
		reg, _ = container.Lookup[*tools.Registry](b.rt, tools.Service)
	}
	return reg
}

// reloadWait bounds how long a call waits for a reload in progress.
const reloadWait = 30 * time.Second

func (b *bridge) readStatus(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	data, err := json.MarshalIndent(b.rt.Status(), "", "  ")
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: statusURI, MIMEType: "application/json", Text: string(data)}}}, nil
}

func (b *bridge) readNotices(sc *scope, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	var log *noticeLog
	if sc.principal != nil {
		log = sc.principal.notices
	} else {
		s := b.session(sc, req.Session)
		b.mu.Lock()
		log = b.notices[s.ID]
		b.mu.Unlock()
	}
	data, err := json.Marshal(struct {
		Notices []notice `json:"notices"`
	}{log.all()})
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: noticesURI, MIMEType: "application/json", Text: string(data)}}}, nil
}

// noticeLog keeps a harness session's last notices.
type noticeLog struct {
	mu      sync.Mutex
	seq     int
	entries []notice
}

type notice struct {
	Seq  int       `json:"seq"`
	Time time.Time `json:"time"`
	Text string    `json:"text"`
}

// maxNotices bounds a noticeLog.
const maxNotices = 100

func (l *noticeLog) add(text string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	l.entries = append(l.entries, notice{Seq: l.seq, Time: time.Now().UTC(), Text: text})
	if len(l.entries) > maxNotices {
		l.entries = append([]notice(nil), l.entries[len(l.entries)-maxNotices:]...)
	}
}

func (l *noticeLog) all() []notice {
	if l == nil {
		return []notice{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]notice{}, l.entries...)
}

// announceNotice tells sc's subscribers of noticesURI that text was added. Only a scope
// whose sessions all belong to one harness session may announce (a principal's, or
// stdio's): resources/updated goes to every subscriber of the URI on the server.
func announceNotice(sc *scope, text string) {
	ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
	defer cancel()
	_ = sc.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: noticesURI, Meta: mcp.Meta{noticeMetaKey: text}})
}

// sessionNotifier delivers an MCP session's notices: a log notification (logger
// dsh.jobs, level info) for a session-lane client; for a stateless-revision client on
// stdio, the notice is announced on dsh://notices (subscriptions/listen).
type sessionNotifier struct {
	sc  *scope
	ss  *mcp.ServerSession
	log *noticeLog
}

// Notify records the notice and sends it in the background with a deadline: a client
// that stops reading must not hold up the job runtime that reports the completion.
func (n sessionNotifier) Notify(text string) {
	n.log.add(text)
	go func() {
		if p := n.ss.InitializeParams(); p != nil && isModern(p.ProtocolVersion) {
			announceNotice(n.sc, text)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		defer cancel()
		_ = n.ss.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "dsh.jobs", Data: text})
	}()
}

// principalNotifier delivers a principal's notices through its dsh://notices resource.
type principalNotifier struct{ p *principal }

func (n principalNotifier) Notify(text string) {
	n.p.notices.add(text)
	if sc := n.p.scope; sc != nil {
		go announceNotice(sc, text)
	}
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
	return answerOf(res)
}

func answerOf(res *mcp.ElicitResult) (container.Answer, error) {
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
