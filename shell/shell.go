package shell

import (
	"context"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/proc"
)

// Service is the key executors are provided under. A profile mounts exactly one.
var Service = container.NewKey[Executor]("shell")

// PolicyService is the key a confining executor provides its PolicyResolver under.
var PolicyService = container.NewKey[PolicyResolver]("sandboxPolicy")

// Executor runs shell commands. Resolve is the only place defaults and caps apply;
// Execute accepts only resolved specs and never re-defaults.
type Executor interface {
	// Resolve turns a request into a fully explicit spec, or explains what is invalid.
	Resolve(req ExecRequest) (ExecSpec, error)
	// Execute starts spec and returns its handle. Exits, timeouts and aborts are
	// results of the handle; Execute fails only for a spec it cannot accept or a
	// composition that cannot run anything (sandbox unavailable). The caller's ctx
	// aborts the execution; pass a context without cancellation to detach it.
	Execute(ctx context.Context, spec ExecSpec) (Execution, error)
	// SandboxMode is "" for executors that do not confine, else their default mode.
	SandboxMode() string
}

// Remote is implemented by executors whose commands run on another host. The session's
// working directory is a local path that means nothing there, so callers do not apply
// it: the default workdir is the executor's own cwd on the remote host, and a relative
// workdir is sent as is, for Resolve to resolve against that cwd.
type Remote interface {
	// RemoteHost names where the commands run, e.g. "user@build-1:22".
	RemoteHost() string
}

// Expiry says what a spec's deadline does.
type Expiry string

const (
	// ExpiryKill kills the command when TimeoutMs passes (the default).
	ExpiryKill Expiry = "kill"
	// ExpiryNone arms no deadline: only Kill, the caller's context or disposal stop it.
	ExpiryNone Expiry = "none"
	// ExpiryHandOver resolves TimeoutMs as ExpiryKill does (the default, the cap) but
	// arms no deadline: the caller watches the time and, when it passes, hands the
	// still-running command over (Detacher) or kills it.
	ExpiryHandOver Expiry = "hand-over"
)

// ExecRequest is what a caller asks for. Only Command is required; nil/zero fields take
// the executor's defaults in Resolve.
type ExecRequest struct {
	Command string
	// Workdir, when set, is the directory to run in (absolute, or relative to the
	// executor's configured cwd).
	Workdir string
	// TimeoutMs overrides the executor's default timeout; above its cap it is clamped.
	TimeoutMs *float64
	// StdoutMaxBytes overrides the per-stream in-memory cap (trusted callers only).
	StdoutMaxBytes *int64
	// Expiry defaults to ExpiryKill.
	Expiry Expiry
	// Stdin, when non-nil, is written to the command once and closed; nil means
	// /dev/null.
	Stdin *string
	// Env holds ordinary variables merged over the scrubbed harness environment.
	Env map[string]string
	// DshEnv is the managed DSH_* snapshot, merged last.
	DshEnv map[string]string
	// Sandbox is the policy a confining executor applies to this call; nil means the
	// executor's default. Non-confining executors ignore it.
	Sandbox *SandboxPolicy
	// SessionID is the calling harness session ("" for none). Executors key
	// per-session resources on it (spill directories, a sandbox's session process); it
	// is not exported to the command (DshEnv carries DSH_SESSION_ID).
	SessionID string
	// Terminal, when set, runs the command under a pseudo-terminal (only with an
	// executor that implements Terminals): the terminal is its stdin, stdout and
	// stderr, so its output is one stream (Stdout), TERM is TerminalTERM, and the
	// execution implements Input. A zero Cols or Rows takes the default size
	// (DefaultTerminalCols × DefaultTerminalRows). Stdin must then be nil.
	Terminal *Terminal
}

// ExecSpec is a resolved request: every field explicit.
type ExecSpec struct {
	Command        string
	Workdir        string
	TimeoutMs      int64
	StdoutMaxBytes int64
	Expiry         Expiry
	Stdin          *string
	Env            map[string]string
	DshEnv         map[string]string
	Sandbox        *SandboxPolicy
	SessionID      string
	// Terminal is the request's terminal with its size made explicit, or nil.
	Terminal *Terminal
}

// Execution is the one handle of a started command; foreground and background use are
// projections of it.
type Execution interface {
	// Result waits for the command and returns how it ended. Only infrastructure
	// failures (unusable workdir, missing bash, a sandbox that cannot confine, a lost
	// connection) are errors. ctx bounds the wait only; it does not kill the command.
	Result(ctx context.Context) (RunResult, error)
	// ReadOutput returns the output produced since the previous read (consuming).
	ReadOutput() ProcessRead
	// Kill ends the command's whole process tree. It returns false once the command
	// has finished; it is idempotent.
	Kill() bool
	// Done is closed when the command has finished and its output is complete.
	Done() <-chan struct{}
	// Exit reports how the command ended (its State is completed or killed), and
	// false while it runs. A start the host refused reports its failure as Err.
	Exit() (proc.Exit, bool)
	// Pid is the command's process id (0 if it never started).
	Pid() int
}

// RunResult is how a command ended.
type RunResult struct {
	// ExitCode is nil when a signal ended the command.
	ExitCode *int
	// Signal is the signal that ended the command ("SIGTERM"…), or "".
	Signal string
	// TimedOut and Aborted say what cut the run short; the first cause wins and they
	// are never both true.
	TimedOut bool
	Aborted  bool
	// TimeoutMs is the effective timeout (0 for ExpiryNone).
	TimeoutMs int64
	Stdout    StreamResult
	Stderr    StreamResult
	// Sandbox is set when the executor confines.
	Sandbox *SandboxFacts
	// Budget is what the command used and which resource limits it reached, when the
	// executor ran it under resource limits and the host accounts them; nil otherwise.
	Budget *proc.Budget
}

// StreamResult is one captured stream.
type StreamResult struct {
	// Text is the retained tail.
	Text string
	// Truncated is true when any byte was dropped from memory.
	Truncated bool
	// SpillPath is a file holding the complete stream, when one exists.
	SpillPath string
	// Bytes is the length of the whole stream.
	Bytes int64
}

// ProcessRead is one consuming read of a running or finished execution.
type ProcessRead struct {
	// Delta is the new output: stdout, then (when stderr produced anything) a "[stderr]"
	// section, joined as in the bash tool's rendering.
	Delta string
	// Lossy is true when part of the new output was dropped from memory before this read.
	Lossy           bool
	StdoutSpillPath string
	StderrSpillPath string
}

// Sandbox modes, narrowest first.
const (
	ModeReadOnly         = "read-only"
	ModeWorkspaceWrite   = "workspace-write"
	ModeDangerFullAccess = "danger-full-access"
)

// ModeRank orders modes by width: read-only < workspace-write < danger-full-access. It
// returns -1 for an unknown mode.
func ModeRank(mode string) int {
	switch mode {
	case ModeReadOnly:
		return 0
	case ModeWorkspaceWrite:
		return 1
	case ModeDangerFullAccess:
		return 2
	}
	return -1
}

// SandboxPolicy is what one call is confined to.
type SandboxPolicy struct {
	Mode string
	// WorkspaceRoot is the canonical (symlink-resolved) directory workspace-write may
	// modify.
	WorkspaceRoot string
	// Escalated: Mode is an escalation the user approved for this call only, so nothing
	// the call starts may outlive it — what its command leaves running is killed when
	// the command exits.
	Escalated bool
}

// SandboxFacts report how a confined command ran.
type SandboxFacts struct {
	Mode string
	// Denied: the command failed because the sandbox refused a file operation.
	Denied bool
	// Enforcement is "full", or "partial" when the kernel enforces only part of the
	// policy.
	Enforcement string
	// RunnerFailed: the sandbox launcher itself failed; the command did not run.
	RunnerFailed bool
}

// PolicyResolver is the `sandboxPolicy` service: the effective policy for a session.
type PolicyResolver interface {
	// Resolve returns the policy for one call: mode = requested (an approved escalation)
	// if set, else the session's override, else the default; workspace root = the
	// session's cwd (canonical), else the configured root.
	Resolve(session *container.Session, requestedMode string) (SandboxPolicy, error)
	// DefaultMode is the executor's configured default mode.
	DefaultMode() string
}
