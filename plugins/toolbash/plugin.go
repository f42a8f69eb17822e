package toolbash

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/prompt"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/shell"
)

// toolName is the tool's name in the registry.
const toolName = "bash"

// promptText is the tool:bash prompt section (order 105).
const promptText = "Check the [exit code: N] marker on every bash result; investigate failures before moving on."

// Plugin declares the bash tool.
var Plugin = container.Define(container.Declaration[*Config]{
	Name:    "tool-bash",
	Aliases: []string{"@deepseek-ai/dsh-tool-bash"},
	Inject:  container.Keys{tools.Service, shell.Service, prompt.Service, shellenv.Service},
	Tools:   []string{toolName},
	Config:  DefaultConfig,
	Apply:   apply,
})

// Module registers Plugin in the catalog.
var Module = container.ModuleOf(Plugin)

// Config is the tool-bash row's config.
type Config struct {
	// EnableRunInBackground exposes run_in_background. Disabled, the parameter is absent
	// from the schema and a forced background call is rejected; no foreground command
	// is handed over to a job either (the two hand-overs below need it).
	EnableRunInBackground bool `yaml:"enableRunInBackground"`
	// InputWaitMs is how long a foreground tty command's output must have been quiet,
	// while it waits for input, before it continues as a background job.
	InputWaitMs float64 `yaml:"inputWaitMs" valid:"a positive finite number"`
	// OnTimeout is what happens to a foreground command still running at its timeout:
	// OnTimeoutKill kills it (the timeout marker), OnTimeoutBackground hands it over to
	// the jobs runtime, still running.
	OnTimeout string `yaml:"onTimeout"`
}

// Values of Config.OnTimeout.
const (
	OnTimeoutKill       = "kill"
	OnTimeoutBackground = "background"
)

// DefaultConfig returns the config with its defaults applied.
func DefaultConfig() *Config {
	return &Config{EnableRunInBackground: true, InputWaitMs: 1000, OnTimeout: OnTimeoutKill}
}

// Validate checks inputWaitMs and onTimeout (the container prefixes the messages with
// "tool-bash: ").
func (c *Config) Validate() error {
	if math.IsNaN(c.InputWaitMs) || math.IsInf(c.InputWaitMs, 0) || c.InputWaitMs <= 0 {
		return errors.New("inputWaitMs must be a positive finite number")
	}
	if c.OnTimeout != OnTimeoutKill && c.OnTimeout != OnTimeoutBackground {
		return fmt.Errorf("onTimeout must be %q or %q, got %q", OnTimeoutKill, OnTimeoutBackground, c.OnTimeout)
	}
	return nil
}

func apply(a *container.Activation, cfg *Config) error {
	reg, err := container.Injected(a, tools.Service)
	if err != nil {
		return err
	}
	exec, err := container.Injected(a, shell.Service)
	if err != nil {
		return err
	}
	prompts, err := container.Injected(a, prompt.Service)
	if err != nil {
		return err
	}
	env, err := container.Injected(a, shellenv.Service)
	if err != nil {
		return err
	}
	t := &bashTool{
		services:   a,
		exec:       exec,
		env:        env,
		background: cfg.EnableRunInBackground,
		sandbox:    exec.SandboxMode(),
		inputWait:  time.Duration(cfg.InputWaitMs * float64(time.Millisecond)),
		onTimeout:  cfg.OnTimeout,
		limits:     executorLimits(exec),
	}
	_, t.remote = exec.(shell.Remote)
	if ts, ok := exec.(shell.Terminals); ok {
		t.terminals = ts.Terminals()
	}
	if t.sandbox != "" {
		t.shaped = t.shapes()
	}
	if prev, seen := rememberMode(reg, t.sandbox); seen && prev != "" && t.sandbox == "" {
		// The executor was swapped for one that does not confine (a reload of the
		// profile): applied, since the user may mean it, but never silently.
		a.Logger().Warn("profile reload widens confinement: the executor no longer confines commands (it confined them in " + prev + " mode by default)")
	}
	if err := reg.Register(a, t.definition()); err != nil {
		return err
	}
	return prompts.Add(a, prompt.Section{Name: "tool:bash", Order: 105, Text: promptText})
}

func (t *bashTool) definition() tools.Tool {
	def := tools.Tool{
		Name:          toolName,
		Description:   toolDescription(t.background, t.sandbox, t.terminals, t.onTimeout == OnTimeoutBackground) + limitsDescription(t.limits),
		InputSchema:   inputSchema(t.background, t.sandbox != "", t.terminals),
		OutputSchema:  outputSchema,
		Execute:       t.execute,
		PresentCall:   presentCall,
		PresentResult: presentResult,
	}
	if t.sandbox != "" {
		def.Shape = t.shape // a role's sandbox ceiling narrows what a session is offered
	}
	return def
}

// Argument names.
const (
	argCommand            = "command"
	argDescription        = "description"
	argTimeoutMs          = "timeoutMs"
	argWorkdir            = "workdir"
	argRunInBackground    = "run_in_background"
	argSandboxPermissions = "sandbox_permissions"
	argJustification      = "justification"
	argTTY                = "tty"
)

// inputSchema is the bash tool's argument schema: command, description, timeoutMs,
// workdir; run_in_background when background is enabled; tty when the executor runs
// terminals; sandbox_permissions and justification when the executor confines.
func inputSchema(background, confining, terminals bool) *tools.Schema {
	if confining {
		return schemaFor(background, terminals, []string{shell.ModeWorkspaceWrite, shell.ModeDangerFullAccess})
	}
	return schemaFor(background, terminals, nil)
}

// schemaFor is the argument schema offering the escalations (none: no
// sandbox_permissions, no justification).
func schemaFor(background, terminals bool, escalations []string) *tools.Schema {
	props := tools.Properties{
		{Name: argCommand, Schema: &tools.Schema{Type: "string",
			Description: "The command, run via bash -c. No state persists between calls — use workdir, not cd."}},
		{Name: argDescription, Schema: &tools.Schema{Type: "string",
			Description: "One-line, active-voice summary of the command (5-10 words), for display only — no effect on execution."}},
		{Name: argTimeoutMs, Schema: &tools.Schema{Type: "number",
			Description: "Timeout override in milliseconds. The executor applies its configured default and cap."}},
		{Name: argWorkdir, Schema: &tools.Schema{Type: "string",
			Description: "Working directory for this call. Defaults to the session's working directory; a relative path is resolved against it."}},
	}
	if background {
		props = append(props, tools.Property{Name: argRunInBackground, Schema: &tools.Schema{Type: "boolean",
			Description: "Run as a background job: the call returns a job id immediately and no timeout applies. Read output with job_output, stop it with job_kill."}})
	}
	if terminals {
		props = append(props, tools.Property{Name: argTTY, Schema: &tools.Schema{Type: "boolean",
			Description: "Run the command under a terminal (TERM=xterm-256color, 120x40): stdin is the terminal and stdout and stderr are one stream. " +
				"For programs that need a terminal or ask for input (prompts, REPLs, interactive installers). Default false."}})
	}
	if len(escalations) > 0 {
		props = append(props,
			tools.Property{Name: argSandboxPermissions, Schema: &tools.Schema{Type: "string",
				Enum:        escalations,
				Description: "Only to retry a command the sandbox denied: the narrowest wider sandbox mode this exact command needs. Requires justification; the user is asked to approve."}},
			tools.Property{Name: argJustification, Schema: &tools.Schema{Type: "string",
				Description: "Required together with sandbox_permissions: one sentence for the user explaining why this exact command needs the wider access."}},
		)
	}
	return &tools.Schema{Type: "object", Properties: props, Required: []string{argCommand, argDescription}}
}

// toolDescription is the bash tool's description for a composition: background says
// whether run_in_background is offered, sandboxMode is the executor's default mode (""
// when it does not confine), terminals whether tty is offered, timeoutHandOver whether a
// command still running at its timeout continues as a job (onTimeout: background).
func toolDescription(background bool, sandboxMode string, terminals, timeoutHandOver bool) string {
	return describe(background, sandboxMode, terminals, timeoutHandOver, []string{shell.ModeWorkspaceWrite, shell.ModeDangerFullAccess})
}

// describe is the description offering the escalations of a confining executor (none:
// a session that cannot widen its sandbox).
func describe(background bool, sandboxMode string, terminals, timeoutHandOver bool, escalations []string) string {
	var b strings.Builder
	b.WriteString("Run a shell command with bash -c and return its output.\n\n")
	b.WriteString("- Every call runs in a fresh bash process: nothing persists between calls (cd, variables, functions, activated environments). " +
		"Choose the directory with workdir, not cd; it defaults to the session's working directory.\n")
	b.WriteString("- The result is stdout, then a [stderr] section when stderr has output, or (no output) when there is none. " +
		"A failed command ends with an [exit code: N] marker, a signal death with [killed by signal: SIG], a timeout with [timed out after Nms]; " +
		"no marker means exit code 0. A nonzero exit is a normal result: read the marker and investigate before moving on.\n")
	b.WriteString("- Managed $DSH_* variables are set for every command (for example $DSH_HOME, the harness home, $DSH_SESSION_ID, this session's id, and $DSH_SHELL=1); use them instead of guessing paths or ids.\n")
	b.WriteString("- Output is bounded: when a stream is too long only its tail is kept and [output truncated; full output: <path>] names a file holding the complete stream — " +
		"read that file (grep, head, tail) instead of re-running the command. Prefer commands whose output is short and to the point.\n")
	if timeoutHandOver && background {
		b.WriteString("- A command still running at its timeout (timeoutMs overrides the default, up to the executor's cap) is not killed: the call returns its output so far, " +
			"then [still running after Nms: continuing as background job <id>; …], and it keeps running as that job — read it with job_output, stop it with job_kill.\n")
	} else {
		b.WriteString("- Commands are killed after a timeout (timeoutMs overrides the default, up to the executor's cap).\n")
	}
	if background {
		b.WriteString("- For long-running work (servers, watchers, long builds or test suites) set run_in_background: true: the call returns a job id immediately and the command runs with no timeout. " +
			"You are notified when it finishes; read its output with job_output and stop it with job_kill when it no longer matters.\n")
	} else {
		b.WriteString("- Background execution is not available: every command must finish within the timeout, so split long work into shorter steps and avoid commands that never exit (servers, watchers).\n")
	}
	if terminals {
		b.WriteString("- Set tty: true for a command that needs a terminal or asks for input (a prompt, a REPL, a confirmation). Its output is shown as text, without colours or cursor movements, stdout and stderr together.")
		if background {
			b.WriteString(" When it stops to wait for input, the call returns its output so far, then [waiting for input: continuing as background job <id>; …], " +
				"and the command keeps running as that job: answer it with job_write (\\n ends a line, \\u0003 is Ctrl-C, \\u0004 Ctrl-D), read it with job_output. " +
				"With run_in_background and tty together, the job takes input from the start.")
		}
		b.WriteString("\n")
	}
	switch {
	case sandboxMode != "" && len(escalations) > 0:
		b.WriteString("- Commands run in a file sandbox (default mode: " + sandboxMode + "). An operation the sandbox refuses fails with [sandbox: file access denied under <mode> mode]. " +
			"Only after such a denial, and only when the command really needs it, retry the exact same command once with sandbox_permissions set to the narrowest wider mode that suffices " +
			"(" + strings.Join(escalations, " or ") + ") and a one-sentence justification; the user is asked to approve. " +
			"Never escalate speculatively, and do not retry after the escalation is rejected.\n")
	case sandboxMode != "":
		b.WriteString("- Commands run in a file sandbox (mode: " + sandboxMode + "), which this session cannot widen. An operation the sandbox refuses fails with [sandbox: file access denied under <mode> mode]: " +
			"do not retry it; find another way or report it.\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}
