package mcpserve

import (
	"context"
	"crypto/rand"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/prompt"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// Options configure a Server. NewSession is required; the zero value of every other
// field is a working default.
type Options struct {
	// NewSession returns a fresh harness session (a random ID, the workspace as Cwd, the
	// sandbox mode) each time a client needs one. The server fills in its Notifier and
	// Prompter, and gives a principal's session the principal's id.
	NewSession func() *container.Session
	// HTTP configures Serve (streamable HTTP); ServeStdio ignores it.
	HTTP HTTPOptions
	// Tuning is what the server does for speed on the serving path; the zero value does
	// none of it. DefaultTuning is what `dsh serve` uses.
	Tuning Tuning
	// MaxCalls bounds the tool calls running at once, across every session and lane
	// (0: DefaultMaxCalls): a call beyond it is answered at once with a tool error, so
	// a client's flood (a batch of 10,000 calls) runs no more commands than that.
	MaxCalls int
	// ApprovalTimeout bounds how long a session-lane approval question (an elicitation)
	// waits for the client's answer (0: DefaultApprovalTimeout); then it is cancelled,
	// and the call ends as the user's cancel would end it.
	ApprovalTimeout time.Duration
}

// DefaultMaxCalls is Options.MaxCalls when it is 0.
const DefaultMaxCalls = 256

// Server serves a runtime's live `tools` registry, `systemPrompt` and status over MCP,
// through any number of *mcp.Server scopes: one per ServeStdio, one for the session lane
// of each Serve (every MCP session is a harness session), and one per principal of the
// stateless lane (the principal is the harness session). Its methods are safe for
// concurrent use.
type Server struct {
	rt              *container.Runtime
	newSession      func() *container.Session
	version         string
	log             *slog.Logger // dsh's own
	sdkLog          *slog.Logger // the SDK's, with its chatter filtered
	http            HTTPOptions
	tuning          Tuning
	stateKey        []byte // signs input_required request states outside a principal
	usedStates      usedStates
	calls           callLimit
	approvalTimeout time.Duration

	mu       sync.Mutex
	scopes   map[*scope]struct{}
	sessions map[*mcp.ServerSession]*container.Session
	notices  map[string]*noticeLog // by harness session id
	// ended holds, per MCP session with a harness session, a channel endWith closes
	// once the harness session has ended (its processes, boxes, temp dirs gone).
	ended sync.Map

	syncMu sync.Mutex
	served map[string]tools.Tool // the tools currently on the servers
	// defs holds, by tool name, each served tool's MCP definition, which a tools/list
	// shows (listFor): the SDK's servers hold stand-ins for its schemas (addTool). A
	// sync.Map: listings read it without syncMu.
	defs sync.Map

	viewMu sync.Mutex
	views  map[*container.Session][]viewTool // what each session's last tools/list showed

	unsubscribe func()
	ballast     *ballastLife
}

func (o Options) maxCalls() int {
	if o.MaxCalls <= 0 {
		return DefaultMaxCalls
	}
	return o.MaxCalls
}

// New returns a server for rt that reports version as its serverInfo and logs to log.
// It follows the runtime from now on (tool-list changes, status updates); Close detaches
// it.
func New(rt *container.Runtime, version string, log *slog.Logger, o Options) *Server {
	if o.NewSession == nil {
		panic("mcpserve: Options.NewSession is nil")
	}
	s := &Server{rt: rt, newSession: o.NewSession, version: version, log: log, sdkLog: sdkLogger(log),
		http: o.HTTP, tuning: o.Tuning, stateKey: randomKey(), calls: callLimit{max: o.maxCalls(), log: log}, scopes: map[*scope]struct{}{},
		sessions: map[*mcp.ServerSession]*container.Session{}, notices: map[string]*noticeLog{},
		served: map[string]tools.Tool{}}
	s.approvalTimeout = o.ApprovalTimeout
	if s.approvalTimeout <= 0 {
		s.approvalTimeout = DefaultApprovalTimeout
	}
	s.ballast = o.Tuning.ballast()
	s.sync()
	s.unsubscribe = rt.Subscribe(s.sync)
	return s
}

// Close detaches the server from the runtime and ends its tuning. It does not end the
// serving calls in flight: their contexts do.
func (s *Server) Close() {
	s.unsubscribe()
	s.ballast.end()
}

// scope is one *mcp.Server and whom it serves: the principal of a stateless-lane server,
// or (principal nil) the MCP sessions connected to it, each its own harness session.
type scope struct {
	server    *mcp.Server
	principal *principal
	base      context.Context // ends with the serving that made the scope: every call in flight ends
}

// newScope creates a server for p (nil: for MCP sessions) that speaks versions, with
// the tools of the moment; its calls end when base does.
func (s *Server) newScope(base context.Context, p *principal, versions []string) *scope {
	sc := &scope{principal: p, base: base}
	sc.server = mcp.NewServer(&mcp.Implementation{Name: "dsh", Version: s.version}, &mcp.ServerOptions{
		Logger:                    s.sdkLog,
		InitializedHandler:        func(_ context.Context, req *mcp.InitializedRequest) { s.session(sc, req) },
		SubscribeHandler:          func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler:        func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		SupportedProtocolVersions: versions,
		Capabilities: &mcp.ServerCapabilities{
			Logging: &mcp.LoggingCapabilities{},
			Tools:   &mcp.ToolCapabilities{ListChanged: true},
		},
	})
	sc.server.AddReceivingMiddleware(s.middleware(sc))
	s.addResources(sc)
	if p != nil {
		p.scope = sc
	}
	s.syncMu.Lock()
	for name := range s.served {
		s.addTool(sc, s.def(name))
	}
	s.mu.Lock()
	s.scopes[sc] = struct{}{}
	s.mu.Unlock()
	s.syncMu.Unlock()
	return sc
}

// dropScope stops feeding sc's server.
func (s *Server) dropScope(sc *scope) {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	delete(s.scopes, sc)
	s.mu.Unlock()
	if sc.principal != nil {
		s.forgetView(sc.principal.session)
	}
}

// middleware fills the initialize and server/discover results with the composed prompt
// of the moment (it changes with hot reload), turns on info-level logging for a
// session-lane client, so job notices reach it even if it never sets a level, and
// narrows a tools/list result to what the session sees (listFor).
func (s *Server) middleware(sc *scope) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" && s.tuning.CallStack {
				ensureCallStack()
			}
			if call, ok := req.(*mcp.CallToolRequest); ok && call.Params != nil && !s.live(call.Params.Name) {
				return s.callUnserved(ctx, call, next)
			}
			res, err := next(ctx, method, req)
			if err != nil {
				return res, err
			}
			ss, _ := req.GetSession().(*mcp.ServerSession)
			switch r := res.(type) {
			case *mcp.InitializeResult:
				r.Instructions = s.instructions(s.session(sc, req))
				if ss != nil {
					_, _ = next(ctx, "logging/setLevel", &mcp.ServerRequest[*mcp.SetLoggingLevelParams]{Session: ss, Params: &mcp.SetLoggingLevelParams{Level: "info"}})
				}
			case *mcp.DiscoverResult:
				r.Instructions = s.instructions(s.session(sc, req))
			case *mcp.ListToolsResult:
				return s.listFor(s.session(sc, req), r), nil
			}
			return res, err
		}
	}
}

func (s *Server) instructions(session *container.Session) string {
	reg, ok := container.Lookup(s.rt, prompt.Service)
	if !ok {
		return ""
	}
	return reg.Compose(session)
}

func randomKey() []byte {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return key
}
