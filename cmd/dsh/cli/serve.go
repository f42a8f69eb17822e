package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

func serveCmd(g *globalFlags) *cobra.Command {
	var httpAddr string
	var sessionTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "serve [--profile P] [--workspace DIR] [--http ADDR]",
		Short: "Serve the composition as an MCP server (stdio, or streamable HTTP with --http)",
		Long: "Serve the composition's tools over MCP: on stdio by default, or over streamable HTTP on\n" +
			"ADDR with --http. The profile file (and its bases) is watched: edits are applied without\n" +
			"restarting, and running processes and jobs survive. Stops on SIGINT, SIGTERM or (stdio)\n" +
			"end of input, after disposing every plugin and killing every process.",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ws, err := g.workspaceDir()
			if err != nil {
				return err
			}
			if _, err := g.session(ws); err != nil {
				return err
			}
			ctx, cancel := signalContext(cmd.Context())
			defer cancel()
			h, log, err := g.start(ctx, slog.LevelInfo, true)
			if err != nil {
				return err
			}
			bridge := newMCPBridge(ctx, h.rt, g.session, ws, version(), log)
			if httpAddr == "" {
				err = bridge.server.Run(ctx, &mcp.StdioTransport{})
			} else {
				err = serveHTTP(ctx, bridge, httpAddr, sessionTimeout, g, log)
			}
			bridge.close()
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
	cmd.Flags().StringVar(&httpAddr, "http", "", "serve streamable HTTP on ADDR (host:port; port 0 picks a free one) instead of stdio")
	cmd.Flags().DurationVar(&sessionTimeout, "session-timeout", time.Hour, "with --http: end a session (and its background jobs) after this long without a request from its client; 0 never")
	return cmd
}

// serveHTTP serves the bridge over streamable HTTP until ctx ends. Every MCP session is
// its own harness session.
func serveHTTP(ctx context.Context, b *mcpBridge, addr string, sessionTimeout time.Duration, g *globalFlags, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--http %q: %w", addr, err)
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return b.server }, &mcp.StreamableHTTPOptions{Logger: log, SessionTimeout: sessionTimeout})
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(g.stderr, "dsh: serving MCP (streamable HTTP) on http://%s/\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// End the sessions first: a client holding the event stream open would otherwise
	// keep Shutdown waiting.
	b.closeSessions()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	<-errc
	return nil
}
