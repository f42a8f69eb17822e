package toolbash

import (
	"strings"

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
	Config:  DefaultConfig,
	Apply:   apply,
})

// Module registers Plugin in the catalog.
var Module = container.ModuleOf(Plugin)

// Config is the tool-bash row's config.
type Config struct {
	// EnableRunInBackground exposes run_in_background. Disabled, the parameter is absent
	// from the schema and a forced background call is rejected.
	EnableRunInBackground bool `yaml:"enableRunInBackground"`
}

// DefaultConfig returns the config with its defaults applied.
func DefaultConfig() *Config { return &Config{EnableRunInBackground: true} }

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
		limits:     executorLimits(exec),
	}
	_, t.remote = exec.(shell.Remote)
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
	return tools.Tool{
		Name:          toolName,
		Description:   toolDescription(t.background, t.sandbox) + limitsDescription(t.limits),
		InputSchema:   inputSchema(t.background, t.sandbox != ""),
		OutputSchema:  outputSchema,
		Execute:       t.execute,
		PresentCall:   presentCall,
		PresentResult: presentResult,
	}
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
)

// inputSchema is the bash tool's argument schema: command, description, timeoutMs,
// workdir; run_in_background when background is enabled; sandbox_permissions and
// justification when the executor confines.
func inputSchema(background, confining bool) *tools.Schema {
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
	if confining {
		props = append(props,
			tools.Property{Name: argSandboxPermissions, Schema: &tools.Schema{Type: "string",
				Enum:        []string{shell.ModeWorkspaceWrite, shell.ModeDangerFullAccess},
				Description: "Only to retry a command the sandbox denied: the narrowest wider sandbox mode this exact command needs. Requires justification; the user is asked to approve."}},
			tools.Property{Name: argJustification, Schema: &tools.Schema{Type: "string",
				Description: "Required together with sandbox_permissions: one sentence for the user explaining why this exact command needs the wider access."}},
		)
	}
	return &tools.Schema{Type: "object", Properties: props, Required: []string{argCommand, argDescription}}
}

// toolDescription is the bash tool's description for a composition: background says
// whether run_in_background is offered, sandboxMode is the executor's default mode (""
// when it does not confine).
func toolDescription(background bool, sandboxMode string) string {
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
	b.WriteString("- Commands are killed after a timeout (timeoutMs overrides the default, up to the executor's cap).\n")
	if background {
		b.WriteString("- For long-running work (servers, watchers, long builds or test suites) set run_in_background: true: the call returns a job id immediately and the command runs with no timeout. " +
			"You are notified when it finishes; read its output with job_output and stop it with job_kill when it no longer matters.\n")
	} else {
		b.WriteString("- Background execution is not available: every command must finish within the timeout, so split long work into shorter steps and avoid commands that never exit (servers, watchers).\n")
	}
	if sandboxMode != "" {
		b.WriteString("- Commands run in a file sandbox (default mode: " + sandboxMode + "). An operation the sandbox refuses fails with [sandbox: file access denied under <mode> mode]. " +
			"Only after such a denial, and only when the command really needs it, retry the exact same command once with sandbox_permissions set to the narrowest wider mode that suffices " +
			"(workspace-write or danger-full-access) and a one-sentence justification; the user is asked to approve. " +
			"Never escalate speculatively, and do not retry after the escalation is rejected.\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}
