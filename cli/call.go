package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/approval"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
	"github.com/dsh-dev/dsh/plugins/tools"
)

func callCmd(g *globalFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "call [--profile P] [--workspace DIR] [--json] TOOL [ARGS_JSON]",
		Short: "Run one tool call and print its result text exactly (exit 1 when the result is an error)",
		Long: "Run one tool call. ARGS_JSON is a JSON object (or - to read it from stdin). The result's\n" +
			"text is printed exactly as the model would read it, nothing added; with --json the output is\n" +
			`{"text", "isError", "value"}. Exit status: 0, or 1 when the result is an error.` + "\n" +
			"A background job the call starts lives as long as the call's session: dsh call waits for it\n" +
			"to finish and prints what job_output reads of it on stderr (Ctrl-C kills it).",
		Args: usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ws, err := g.workspaceDir()
			if err != nil {
				return err
			}
			raw, err := g.callArgs(args)
			if err != nil {
				return err
			}
			ctx, cancel := signalContext(cmd.Context())
			defer cancel()
			h, _, err := g.start(ctx, slog.LevelWarn, false)
			if err != nil {
				return err
			}
			defer h.stop()
			return g.call(ctx, h.rt, ws, args[0], raw, asJSON)
		},
	}
	addWorkspaceFlag(cmd, g)
	addSandboxModeFlag(cmd, g)
	addRoleFlag(cmd, g)
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"text", "isError", "value"} instead of the text`)
	return cmd
}

// callArgs returns the call's ARGS_JSON: the second argument, or stdin for "-".
func (g *globalFlags) callArgs(args []string) (json.RawMessage, error) {
	if len(args) < 2 {
		return nil, nil
	}
	if args[1] != "-" {
		return json.RawMessage(args[1]), nil
	}
	raw, err := io.ReadAll(g.stdin)
	if err != nil {
		return nil, fmt.Errorf("reading arguments from stdin: %w", err)
	}
	return raw, nil
}

// call runs tool in a session of its own and prints the result, then waits for the
// background jobs the call started (they end with the session), and ends the session.
// The spill files the call and its jobs reported are kept first (the session's end
// deletes its own).
func (g *globalFlags) call(ctx context.Context, rt *container.Runtime, ws, tool string, raw json.RawMessage, asJSON bool) error {
	reg, ok := container.Lookup(rt, tools.Service)
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
	defer rt.EndSession(session.ID)
	keep := func(*tools.Result) {}
	if env, ok := container.Lookup(rt, shellenv.Service); ok {
		keep = func(res *tools.Result) { preserveSpills(res, rt, session.ID, filepath.Join(env.Home(), "spill")) }
	}
	res := reg.Call(ctx, tool, raw, session)
	keep(&res)
	printErr := g.printResult(res, asJSON)
	if err := g.awaitJobs(ctx, rt, reg, session, keep); err != nil {
		return err
	}
	return printErr
}

// printResult prints the result's text exactly, or with --json {"text", "isError",
// "value"}; a result with isError ends the command with exit status 1.
func (g *globalFlags) printResult(res tools.Result, asJSON bool) error {
	if asJSON {
		out, err := json.Marshal(struct {
			Text    string `json:"text"`
			IsError bool   `json:"isError"`
			Value   any    `json:"value"`
		}{res.Text, res.IsError, res.Value})
		if err != nil {
			return err
		}
		if writesToTerminal(g.stdout) {
			out = asciiJSON(out)
		}
		fmt.Fprintf(g.stdout, "%s\n", out)
	} else {
		fmt.Fprint(g.stdout, forTerminal(g.stdout, res.Text))
	}
	if res.IsError {
		return exitCodeError(exitError)
	}
	return nil
}

// forTerminal is text as it is printed to w: exact when w is not a terminal; on a
// terminal nothing the command printed may act on it (retitle it, hide text, move the
// cursor), so every control character but \n and \t is escaped as in approval prompts,
// and the shell's prompt starts on a line of its own.
func forTerminal(w io.Writer, text string) string {
	if !writesToTerminal(w) {
		return text
	}
	text = approval.EscapeForTerminal(text)
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return text
}

// asciiJSON escapes every non-ASCII character of a JSON text as \uXXXX (a surrogate
// pair above U+FFFF): the same JSON value, with nothing a terminal would act on (the
// encoder already escapes the C0 controls).
func asciiJSON(data []byte) []byte {
	var b strings.Builder
	for _, r := range string(data) {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, "\\u%04x\\u%04x", r1, r2)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return []byte(b.String())
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
