package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/spf13/cobra"
	"go.uber.org/fx"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/approval"
	"github.com/dsh-dev/dsh/plugins/prompt"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/shell"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // a failed command, or a tool result with isError
	exitUsage = 2 // bad flags or arguments
)

// Main runs the dsh command line with args (without the program name) and returns the
// process exit code. extra adds plugin modules (container.ModuleOf) to the catalog.
// Call bashsandbox.MaybeRunLauncher first thing in main, before Main.
func Main(args []string, extra ...fx.Option) int {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(procs(runtime.GOMAXPROCS(0)))
	}
	return run(args, os.Stdin, os.Stdout, os.Stderr, extra)
}

// procs is how many processors dsh schedules its goroutines on, of the n Go would use
// (unless GOMAXPROCS is set): a quarter, at least one. dsh's own work is moving bytes
// and JSON between pipes and a client; the processors are for the commands it runs.
// With fewer Ps, each call wakes fewer scheduler threads, which on a small machine
// compete with the command for the CPU: on 2 cores a call of `true` through serve
// made 10 context switches with one P against 22 with two, and its ratio to a raw exec
// was 0.05–0.07 lower (the two measured alternately in one run).
func procs(n int) int { return max(1, n/4) }

type globalFlags struct {
	profile     string
	workspace   string
	sandboxMode string
	role        string
	logLevel    string
	extra       []fx.Option
	stdin       io.Reader
	stdout      io.Writer
	stderr      io.Writer
}

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

func run(args []string, stdin io.Reader, stdout, stderr io.Writer, extra []fx.Option) int {
	g := &globalFlags{extra: extra, stdin: stdin, stdout: stdout, stderr: stderr}
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

// session returns a new harness session for the workspace, with the --sandbox-mode
// override.
func (g *globalFlags) session(ws string) (*container.Session, error) {
	if g.sandboxMode != "" && shell.ModeRank(g.sandboxMode) < 0 {
		return nil, usageError{fmt.Errorf("--sandbox-mode %q: want read-only, workspace-write or danger-full-access", g.sandboxMode)}
	}
	return &container.Session{ID: newSessionID(), Cwd: ws, SandboxMode: g.sandboxMode, Role: g.role}, nil
}

// workspaceDir returns the absolute, existing workspace directory.
func (g *globalFlags) workspaceDir() (string, error) {
	dir := g.workspace
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		dir = wd
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("--workspace %q: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("--workspace %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("--workspace %q: not a directory", dir)
	}
	return abs, nil
}

// start composes g.profile, logging at level (unless --log-level says otherwise).
func (g *globalFlags) start(ctx context.Context, level slog.Level, watch bool) (*harness, *slog.Logger, error) {
	log, err := g.logger(level)
	if err != nil {
		return nil, nil, err
	}
	h, err := startHarness(ctx, harnessOptions{profile: g.profile, watch: watch, log: log, extra: g.extra})
	if err != nil {
		return nil, nil, err
	}
	if err := g.checkSandboxMode(h.rt); err != nil {
		_ = h.stop()
		return nil, nil, err
	}
	if err := g.checkRole(h.rt); err != nil {
		_ = h.stop()
		return nil, nil, err
	}
	return h, log, nil
}

// checkSandboxMode refuses --sandbox-mode when the composition's executor does not
// confine: the mode would be silently ignored and every command would run unconfined.
func (g *globalFlags) checkSandboxMode(rt *container.Runtime) error {
	if g.sandboxMode == "" {
		return nil
	}
	if ex, ok := container.Lookup[shell.Executor](rt, shell.Service); ok && ex.SandboxMode() != "" {
		return nil
	}
	executor := "no executor is active"
	for _, r := range rt.Status().Rows {
		if p, ok := rt.Catalog().Plugin(r.Plugin); ok && p.Provides(shell.Service) {
			executor = "its executor, " + r.Plugin + ", does not confine commands"
		}
	}
	return usageError{fmt.Errorf("--sandbox-mode %s: profile %q cannot apply it: %s (use a profile with bash-sandbox, e.g. --profile sandbox)",
		g.sandboxMode, g.profile, executor)}
}

func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

func callCmd(g *globalFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "call [--profile P] [--workspace DIR] [--json] TOOL [ARGS_JSON]",
		Short: "Run one tool call and print its result text exactly (exit 1 when the result is an error)",
		Long: "Run one tool call. ARGS_JSON is a JSON object (or - to read it from stdin). The result's\n" +
			"text is printed exactly as the model would read it, nothing added; with --json the output is\n" +
			`{"text", "isError", "value"}. Exit status: 0, or 1 when the result is an error.`,
		Args: usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ws, err := g.workspaceDir()
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if len(args) == 2 {
				raw = json.RawMessage(args[1])
				if args[1] == "-" {
					if raw, err = io.ReadAll(g.stdin); err != nil {
						return fmt.Errorf("reading arguments from stdin: %w", err)
					}
				}
			}
			ctx, cancel := signalContext(cmd.Context())
			defer cancel()
			h, _, err := g.start(ctx, slog.LevelWarn, false)
			if err != nil {
				return err
			}
			defer h.stop()
			reg, ok := container.Lookup[*tools.Registry](h.rt, tools.Service)
			if !ok {
				return fmt.Errorf("profile %q composes no active tools registry (see dsh status)", g.profile)
			}
			session, err := g.session(ws)
			if err != nil {
				return err
			}
			prompter := &lazyTerminal{}
			defer prompter.close()
			session.Prompter = prompter
			res := reg.Call(ctx, args[0], raw, session)
			// Before the session ends: its end deletes the session's spill files.
			if env, ok := container.Lookup[*shellenv.Registry](h.rt, shellenv.Service); ok {
				preserveSpills(&res, h.rt, session.ID, filepath.Join(env.Home(), "spill"))
			}
			h.rt.EndSession(session.ID)
			if asJSON {
				out, err := json.Marshal(struct {
					Text    string `json:"text"`
					IsError bool   `json:"isError"`
					Value   any    `json:"value"`
				}{res.Text, res.IsError, res.Value})
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "%s\n", out)
			} else {
				fmt.Fprint(g.stdout, res.Text)
			}
			if res.IsError {
				return exitCodeError(exitError)
			}
			return nil
		},
	}
	addWorkspaceFlag(cmd, g)
	addSandboxModeFlag(cmd, g)
	addRoleFlag(cmd, g)
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"text", "isError", "value"} instead of the text`)
	return cmd
}

// lazyTerminal asks on the controlling terminal, opened on first use; without one the
// question cannot be asked (approval answers "unavailable").
type lazyTerminal struct {
	p       *approval.TerminalPrompter
	closeFn func() error
}

func (l *lazyTerminal) Confirm(ctx context.Context, message string) (container.Answer, error) {
	p, err := l.terminal()
	if err != nil {
		return "", err
	}
	return p.Confirm(ctx, message)
}

func (l *lazyTerminal) close() {
	if l.closeFn != nil {
		_ = l.closeFn()
	}
}

func statusCmd(g *globalFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [--profile P] [--json]",
		Short: "Compose the profile, report each row's state, and dispose it (exit 1 when a row failed or can never activate)",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, _, err := g.start(cmd.Context(), slog.LevelWarn, false)
			if err != nil {
				return err
			}
			st := h.rt.Status()
			if err := h.stop(); err != nil {
				return err
			}
			if asJSON {
				out, err := json.MarshalIndent(st, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "%s\n", out)
			} else {
				printStatus(g.stdout, st)
			}
			// Composing is synchronous: a row still pending now can never activate (the
			// start logged why at WARN), and one that failed keeps its error. Either way
			// the composition does not work: exit 1, so scripts notice.
			for _, r := range st.Rows {
				if r.State == container.StateFailed || r.State == container.StatePending {
					return exitCodeError(exitError)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}

func printStatus(w io.Writer, st container.Status) {
	fmt.Fprintf(w, "profile: %s\n", st.Profile)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPLUGIN\tSTATE\tNOTES")
	for _, r := range st.Rows {
		var notes []string
		for _, s := range r.Missing {
			note := "missing " + s
			if c := r.Candidates[s]; len(c) > 0 {
				note += " (provided by: " + strings.Join(c, ", ") + ")"
			} else {
				note += " (no catalog plugin provides it)"
			}
			notes = append(notes, note)
		}
		if r.Error != "" {
			notes = append(notes, "error: "+r.Error)
		}
		if r.Detail != "" {
			notes = append(notes, r.Detail)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.ID, r.Plugin, r.State, strings.Join(notes, "; "))
	}
	tw.Flush()
	if st.LastReloadError != "" {
		fmt.Fprintf(w, "last reload error: %s\n", st.LastReloadError)
	}
}

func toolsCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tools [--profile P] [--role R]",
		Short: "Print the composed tool definitions as JSON",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, _, err := g.start(cmd.Context(), slog.LevelWarn, false)
			if err != nil {
				return err
			}
			defer h.stop()
			type def struct {
				Name         string             `json:"name"`
				Description  string             `json:"description"`
				InputSchema  *tools.Schema      `json:"inputSchema"`
				OutputSchema *jsonschema.Schema `json:"outputSchema,omitempty"`
			}
			defs := []def{}
			if reg, ok := container.Lookup[*tools.Registry](h.rt, tools.Service); ok {
				// As a session of --role (else of the default role, if any) sees them.
				for _, t := range reg.ToolsFor(&container.Session{Role: g.role}) {
					defs = append(defs, def{t.Name, t.Description, t.InputSchema, t.OutputSchema})
				}
			}
			out, err := json.MarshalIndent(defs, "", "  ")
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "%s\n", out)
			return nil
		},
	}
	addRoleFlag(cmd, g)
	return cmd
}

func promptCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "prompt [--profile P] [--workspace DIR]",
		Short: "Print the composed system prompt",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ws, err := g.workspaceDir()
			if err != nil {
				return err
			}
			h, _, err := g.start(cmd.Context(), slog.LevelWarn, false)
			if err != nil {
				return err
			}
			defer h.stop()
			text := ""
			if reg, ok := container.Lookup[*prompt.Registry](h.rt, prompt.Service); ok {
				session, err := g.session(ws)
				if err != nil {
					return err
				}
				text = reg.Compose(session)
			}
			fmt.Fprintln(g.stdout, text)
			return nil
		},
	}
	addWorkspaceFlag(cmd, g)
	addSandboxModeFlag(cmd, g)
	return cmd
}

func checkCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "check [--profile P]",
		Short: "Validate the profile without running anything",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger(slog.LevelWarn)
			if err != nil {
				return err
			}
			h, err := startHarness(cmd.Context(), harnessOptions{log: log, extra: g.extra})
			if err != nil {
				return err
			}
			defer h.stop()
			p, err := h.loader.Load(g.profile)
			if err != nil {
				return err
			}
			// The errors name the file (and row and key) themselves.
			if err := h.rt.Validate(p.Rows); err != nil {
				return err
			}
			if err := h.rt.CheckActivation(p.Rows); err != nil {
				return err
			}
			enabled := 0
			for _, r := range p.Rows {
				if !r.Disabled {
					enabled++
				}
			}
			fmt.Fprintf(g.stdout, "profile %s: ok (%d rows)\n", p.Name, enabled)
			for _, note := range policyNotes(h.catalog, p.Rows) {
				fmt.Fprintln(g.stdout, note)
			}
			return nil
		},
	}
}
