package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/container"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
)

func serveCmd(g *globalFlags) *cobra.Command {
	var o httpOptions
	cmd := &cobra.Command{
		Use:   "serve [--profile P] [--workspace DIR] [--http ADDR [--token-file FILE] [--allow-remote] [--max-sessions N]]",
		Short: "Serve the composition as an MCP server (stdio, or streamable HTTP at /mcp with --http)",
		Long: "Serve the composition's tools over MCP: on stdio by default, or over streamable HTTP at\n" +
			"http://ADDR/mcp with --http, where every request needs \"Authorization: Bearer <token>\" (the\n" +
			"tokens are the lines of --token-file, else one is generated into $DSH_HOME/serve-token) and ADDR\n" +
			"must be a loopback address unless --allow-remote. Both the session-based MCP revisions and the\n" +
			"stateless 2026-07-28 revision are served. The profile file (and its bases) is watched: edits\n" +
			"are applied without restarting, and running processes and jobs survive. Stops on SIGINT,\n" +
			"SIGTERM or (stdio) end of input, after disposing every plugin and killing every process.",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ws, err := g.workspaceDir()
			if err != nil {
				return err
			}
			if _, err := g.session(ws); err != nil {
				return err
			}
			if o.addr != "" {
				if err := checkAddr(o.addr, o.allowRemote); err != nil {
					return err
				}
				if o.maxSessions < 1 {
					return usageError{fmt.Errorf("--max-sessions %d: want at least 1", o.maxSessions)}
				}
			} else if isTerminal(g.stdin) {
				fmt.Fprintln(g.stderr, "dsh: serving MCP (JSON-RPC, one message per line) on stdin/stdout for an MCP client to start; press Ctrl-D or Ctrl-C to stop")
			}
			ctx, cancel := signalContext(cmd.Context())
			defer cancel()
			h, log, err := g.start(ctx, slog.LevelInfo, true)
			if err != nil {
				return err
			}
			defer stackBallast()()
			newSession := func() *container.Session {
				s, _ := g.session(ws) // the flags were checked above
				return s
			}
			b := newBridge(ctx, h.rt, newSession, version(), log, sdkLogger(log))
			if o.addr == "" {
				err = serveStdio(ctx, b, g.stdin, g.stdout)
			} else {
				var tokens []string
				home := dshHome(h.rt)
				if tokens, err = loadTokens(o.tokenFile, home, g.stderr); err == nil {
					// Confined commands must not read it (and drive this endpoint); the
					// generated one, in the dsh home, the sandbox always hides.
					if o.tokenFile != "" {
						bashsandbox.MaskFile(o.tokenFile)
					}
					err = serveHTTP(ctx, b, tokens, o, g.stderr, log)
				}
			}
			b.close()
			if stopErr := h.stop(); stopErr != nil {
				log.Error("shutdown", "err", stopErr)
			}
			if err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		},
	}
	addWorkspaceFlag(cmd, g)
	addSandboxModeFlag(cmd, g)
	addRoleFlag(cmd, g)
	f := cmd.Flags()
	f.StringVar(&o.addr, "http", "", "serve streamable HTTP at http://ADDR/mcp (host:port; port 0 picks a free one) instead of stdio")
	f.StringVar(&o.tokenFile, "token-file", "", "with --http: the bearer tokens, one per line (one principal each); default: generate one into $DSH_HOME/serve-token")
	f.BoolVar(&o.allowRemote, "allow-remote", false, "with --http: allow a non-loopback ADDR")
	f.IntVar(&o.maxSessions, "max-sessions", 64, "with --http: the most harness sessions at once (MCP sessions and stateless-revision principals); beyond it: HTTP 503")
	f.DurationVar(&o.sessionTimeout, "session-timeout", time.Hour, "with --http: end a session (and its background jobs) after this long without a request from its client; 0 never")
	return cmd
}

// serveStdio serves the bridge to one client on in/out until the input ends or ctx does.
func serveStdio(ctx context.Context, b *bridge, in io.Reader, out io.Writer) error {
	sc := b.newScope(nil, allProtocolVersions)
	ss, err := sc.server.Connect(ctx, &stdioTransport{in: in, out: out}, nil)
	if err != nil {
		return err
	}
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	select {
	case err := <-ended:
		return err
	case <-ctx.Done():
		_ = ss.Close()
		<-ended
		return nil
	}
}

// isTerminal reports whether r is a terminal.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
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

// sdkLogger is the MCP SDK's logger: log, but only warnings and errors unless dsh logs
// at debug level — the SDK reports every session and notification at info.
func sdkLogger(log *slog.Logger) *slog.Logger {
	if log.Enabled(context.Background(), slog.LevelDebug) {
		return log
	}
	return slog.New(minLevel{log.Handler(), slog.LevelWarn})
}

// minLevel is a slog.Handler that drops records below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(attrs), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}
