package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/mcpserve"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
)

// serveFlags are the flags of `dsh serve` beyond the global ones.
type serveFlags struct {
	addr           string
	allowRemote    bool
	tokenFile      string
	maxSessions    int
	sessionTimeout time.Duration
	maxCalls       int
	approvalWait   time.Duration
	given          func(flag string) bool // whether the command line set the flag
}

func serveCmd(g *globalFlags) *cobra.Command {
	var o serveFlags
	cmd := &cobra.Command{
		Use: "serve [--profile P] [--workspace DIR] [--sandbox-mode M] [--log-level L]\n" +
			"            [--http ADDR [--token-file FILE] [--allow-remote] [--max-sessions N] [--session-timeout D]]",
		DisableFlagsInUseLine: true, // Use lists them
		Short:                 "Serve the composition as an MCP server (stdio, or streamable HTTP at /mcp with --http)",
		Long: "Serve the composition's tools over MCP: on stdio by default, or over streamable HTTP at\n" +
			"http://ADDR/mcp with --http, where every request needs \"Authorization: Bearer <token>\" (the\n" +
			"tokens are the lines of --token-file, else one is generated into $DSH_HOME/serve-token) and ADDR\n" +
			"must be a loopback address unless --allow-remote. Both the session-based MCP revisions and the\n" +
			"stateless 2026-07-28 revision are served. The profile file (and its bases) is watched: edits\n" +
			"are applied without restarting, and running processes and jobs survive. Stops on SIGINT,\n" +
			"SIGTERM, SIGHUP or (stdio) the end of its input or of its output, after disposing every\n" +
			"plugin and killing every process.",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.given = func(name string) bool { return cmd.Flags().Changed(name) }
			return g.serve(cmd.Context(), o)
		},
	}
	addWorkspaceFlag(cmd, g)
	addSandboxModeFlag(cmd, g)
	addRoleFlag(cmd, g)
	f := cmd.Flags()
	f.StringVar(&o.addr, "http", "", "serve streamable HTTP at http://ADDR/mcp (host:port; port 0 picks a free one) instead of stdio")
	f.StringVar(&o.tokenFile, "token-file", "", "with --http: the bearer tokens, one per line (one principal each), each optionally followed by the role of its sessions (\"<token> <role>\"); default: generate one into $DSH_HOME/serve-token")
	f.BoolVar(&o.allowRemote, "allow-remote", false, "with --http: allow a non-loopback ADDR")
	f.IntVar(&o.maxSessions, "max-sessions", 64, "with --http: the most harness sessions at once (MCP sessions and stateless-revision principals); beyond it: HTTP 503")
	f.DurationVar(&o.sessionTimeout, "session-timeout", time.Hour, "with --http: end a session (and its background jobs) after this long without a request from its client; 0 never")
	f.IntVar(&o.maxCalls, "max-calls", mcpserve.DefaultMaxCalls, "the most tool calls running at once, across every session; beyond it a call gets a tool error at once")
	f.DurationVar(&o.approvalWait, "approval-timeout", mcpserve.DefaultApprovalTimeout, "how long an approval question (an MCP elicitation) waits for the client's answer; then it is cancelled")
	return cmd
}

// serve runs `dsh serve`: check the flags, compose the profile, serve until the input or
// a signal ends it, dispose the composition.
func (g *globalFlags) serve(ctx context.Context, o serveFlags) error {
	ws, err := g.workspaceDir()
	if err != nil {
		return err
	}
	if _, err := g.session(ws); err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	ln, tokens, err := o.listen()
	if err != nil {
		return err
	}
	if ln != nil {
		defer ln.Close()
	}
	if o.addr == "" && isTerminal(g.stdin) {
		fmt.Fprintln(g.stderr, "dsh: serving MCP (JSON-RPC, one message per line) on stdin/stdout for an MCP client to start; press Ctrl-D or Ctrl-C to stop")
	}
	ctx, cancel := signalContext(ctx)
	defer cancel()
	defer keepBrokenPipes()()
	// The first answer does not wait for the sandbox's probe, nor the first session for
	// its box's process to start.
	bashsandbox.ProbeInBackground()
	bashsandbox.StartBoxAhead()
	h, log, err := g.start(ctx, slog.LevelInfo, true)
	if err != nil {
		return err
	}
	err = g.serveWith(ctx, h.rt, log, ws, o, ln, tokens)
	if stopErr := h.stop(); stopErr != nil {
		log.Error("shutdown", "err", stopErr)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// serveWith serves rt's composition on stdio, or on ln (--http) with the bearer tokens
// of --token-file, else the dsh home's.
func (g *globalFlags) serveWith(ctx context.Context, rt *container.Runtime, log *slog.Logger, ws string, o serveFlags, ln net.Listener, tokens []tokenLine) error {
	opts := mcpserve.Options{
		NewSession: func() *container.Session {
			// The first client is here: its first answer is on its way.
			defer bashsandbox.OpenBoxAhead()
			s, _ := g.session(ws) // the flags were checked before
			return s
		},
		HTTP: mcpserve.HTTPOptions{
			AllowRemote:    o.allowRemote,
			MaxSessions:    o.maxSessions,
			SessionTimeout: o.sessionTimeout,
		},
		Tuning:          g.tuning,
		MaxCalls:        o.maxCalls,
		ApprovalTimeout: o.approvalWait,
	}
	if o.addr == "" {
		srv := mcpserve.New(rt, version(), log, opts)
		defer srv.Close()
		return srv.ServeStdio(ctx, g.stdin, g.stdout)
	}
	if tokens == nil {
		home, err := homeToken(dshHome(rt), g.stderr)
		if err != nil {
			return err
		}
		tokens = []tokenLine{{token: home[0]}}
	}
	roles, err := g.tokenRoles(rt, o.tokenFile, tokens)
	if err != nil {
		return err
	}
	// Confined commands must not read it (and drive this endpoint); the generated one,
	// in the dsh home, the sandbox always hides.
	if o.tokenFile != "" {
		bashsandbox.MaskFile(o.tokenFile)
	}
	opts.HTTP.Tokens, opts.HTTP.Roles = tokensOf(tokens), roles
	srv := mcpserve.New(rt, version(), log, opts)
	defer srv.Close()
	fmt.Fprintf(g.stderr, "dsh: serving MCP (streamable HTTP) on http://%s%s\n", ln.Addr(), mcpserve.Endpoint)
	return srv.Serve(ctx, ln)
}

// httpOnly are the flags that only serving over HTTP uses.
var httpOnly = []string{"token-file", "allow-remote", "max-sessions", "session-timeout"}

// check validates the HTTP flags before anything is composed.
func (o serveFlags) check() error {
	if o.maxCalls < 1 {
		return usageError{fmt.Errorf("--max-calls %d: want at least 1", o.maxCalls)}
	}
	if o.approvalWait <= 0 {
		return usageError{fmt.Errorf("--approval-timeout %s: want a positive duration", o.approvalWait)}
	}
	if o.addr == "" {
		for _, name := range httpOnly {
			if o.given != nil && o.given(name) {
				return usageError{fmt.Errorf("--%s applies to serving over HTTP: use it with --http ADDR", name)}
			}
		}
		return nil
	}
	if err := checkAddr(o.addr, o.allowRemote); err != nil {
		return err
	}
	if o.maxSessions < 1 {
		return usageError{fmt.Errorf("--max-sessions %d: want at least 1", o.maxSessions)}
	}
	return nil
}

// listen reads --token-file and binds --http's address, before anything is composed or
// written: a port in use, or a token file that cannot be read, fails the start at once
// and leaves the dsh home's token file as it was. Without --http it does nothing.
func (o serveFlags) listen() (net.Listener, []tokenLine, error) {
	if o.addr == "" {
		return nil, nil, nil
	}
	var tokens []tokenLine
	if o.tokenFile != "" {
		var err error
		if tokens, err = readTokenFile(o.tokenFile); err != nil {
			return nil, nil, err
		}
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--http %q: %w", o.addr, err)
	}
	return ln, tokens, nil
}

// isTerminal reports whether r is a terminal.
func isTerminal(r io.Reader) bool { return fileIsTerminal(r) }

// writesToTerminal reports whether w is a terminal.
func writesToTerminal(w io.Writer) bool { return fileIsTerminal(w) }

// fileIsTerminal reports whether v is an *os.File open on a terminal.
func fileIsTerminal(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	rc, err := f.SyscallConn() // not f.Fd(): it would put a polled file in blocking mode
	if err != nil {
		return false
	}
	terminal := false
	_ = rc.Control(func(fd uintptr) {
		_, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
		terminal = err == nil
	})
	return terminal
}
