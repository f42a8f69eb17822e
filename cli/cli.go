package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"go.uber.org/fx"

	"github.com/dsh-dev/dsh/mcpserve"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // a failed command, or a tool result with isError
	exitUsage = 2 // bad flags or arguments
)

// Options configure Run. The zero value is dsh's catalog and a `serve` without tuning.
type Options struct {
	// Plugins adds plugin modules (container.ModuleOf) to the catalog.
	Plugins []fx.Option
	// Tuning is what `serve` does for speed (see mcpserve.Tuning). Run never applies
	// FewerProcs: GOMAXPROCS belongs to whoever owns the process (Tuning.ApplyProcs).
	Tuning mcpserve.Tuning
}

// Main runs the dsh command line with args (without the program name) and returns the
// process exit code. extra adds plugin modules (container.ModuleOf) to the catalog.
// `serve` uses mcpserve.DefaultTuning, except that Main never changes GOMAXPROCS; Run
// chooses the tuning. Call bashsandbox.MaybeRunLauncher first thing in main, before Main.
func Main(args []string, extra ...fx.Option) int {
	return Run(args, Options{Plugins: extra, Tuning: mcpserve.DefaultTuning()})
}

// Run is Main with its options spelled out.
func Run(args []string, o Options) int {
	return run(args, os.Stdin, os.Stdout, os.Stderr, o)
}

type globalFlags struct {
	profile     string
	workspace   string
	sandboxMode string
	role        string
	logLevel    string
	extra       []fx.Option
	tuning      mcpserve.Tuning
	stdin       io.Reader
	stdout      io.Writer
	stderr      io.Writer
}

// refusal ends the command with exit status 2 and its message (no usage hint).
type refusal struct{ error }

// usageError is a mistake in the command line: exit status 2 and a pointer to --help.
type usageError struct{ error }

// usageArgs makes a positional-argument check's failure a usage error.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer, o Options) int {
	g := &globalFlags{extra: o.Plugins, tuning: o.Tuning, stdin: stdin, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "dsh",
		Short:         "dsh composes plugin profiles into an agent harness and serves its tools over MCP",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVarP(&g.profile, "profile", "p", "default", "built-in profile name (default, sandbox, minimal) or a profile file path")
	pf.StringVar(&g.logLevel, "log-level", "", "log level on stderr: debug, info, warn, error (default: info for serve, warn otherwise)")
	root.AddCommand(serveCmd(g), callCmd(g), statusCmd(g), toolsCmd(g), promptCmd(g), checkCmd(g), explainCmd(g))

	err := root.ExecuteContext(context.Background())
	var exit exitCodeError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &exit):
		return int(exit)
	case errors.As(err, new(refusal)):
		fmt.Fprintf(stderr, "dsh: %v\n", err)
		return exitUsage
	case errors.As(err, new(usageError)) || strings.HasPrefix(err.Error(), "unknown command"):
		fmt.Fprintf(stderr, "dsh: %v\nRun 'dsh --help' for usage.\n", err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "dsh: %v\n", err)
		return exitError
	}
}

// exitCodeError ends the command with a code and no message (the output said it all).
type exitCodeError int

func (e exitCodeError) Error() string { return fmt.Sprintf("exit %d", int(e)) }

func (g *globalFlags) logger(defaultLevel slog.Level) (*slog.Logger, error) {
	level := defaultLevel
	if g.logLevel != "" {
		if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
			return nil, usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel)}
		}
	}
	return slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: level})), nil
}

func addWorkspaceFlag(cmd *cobra.Command, g *globalFlags) {
	cmd.Flags().StringVarP(&g.workspace, "workspace", "w", "", "the session's working directory (default: the current directory)")
}

func addSandboxModeFlag(cmd *cobra.Command, g *globalFlags) {
	cmd.Flags().StringVar(&g.sandboxMode, "sandbox-mode", "", "the session's sandbox mode under a confining executor: read-only, workspace-write or danger-full-access (default: the executor's defaultMode)")
}

// signalContext ends with SIGINT, SIGTERM or SIGHUP (the terminal or the session that
// started dsh went away): each is a graceful stop, every process killed and every
// temporary directory removed.
func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
}

// keepBrokenPipes makes a write to a closed stdout or stderr an EPIPE error instead of
// a SIGPIPE that kills dsh without its shutdown, until the returned function is called.
// (Notify, not Ignore: an ignored SIGPIPE would be inherited by every command.)
func keepBrokenPipes() (restore func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGPIPE)
	return func() { signal.Stop(ch) }
}
