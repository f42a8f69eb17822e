package bashexec

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dsh-dev/dsh/proc"
	"github.com/dsh-dev/dsh/shell"
)

// Command is what one call spawns. Options.Prepare may rewrite it before the spawn.
type Command struct {
	// Argv starts as ["bash", "-c", <command>]; the Spawner resolves the program (the
	// local one looks "bash" up in the harness's PATH once).
	Argv []string
	// Dir is the working directory (the spec's Workdir).
	Dir string
	// Env and DshEnv are the spec's ordinary and managed variables (nil when absent).
	// Prepare may replace them; it must not modify the maps it was given in place.
	Env    map[string]string
	DshEnv map[string]string
	// Stdin is written to the command once and closed; nil means no input (/dev/null).
	Stdin []byte
	// Owner is the calling harness session's id ("" for none): spawners key per-session
	// resources (spill directories) on it.
	Owner string
	// Start, when set, starts the command's leader in place of the spawner's own fork
	// and exec — a box (the per-session sandbox process) that is the leader's parent
	// (see proc.Starter). The Supervisor's Spawner passes it on to the Supervisor,
	// which owns the tree all the same; a spawner that cannot honour it must fail the
	// spawn rather than ignore it (the command would run outside what Prepare arranged).
	Start proc.Starter
	// Terminal, when set, runs the command under a pseudo-terminal of this size (see
	// shell.ExecRequest.Terminal); Stdin is then nil, and the Process the Spawner
	// returns must be a TerminalProcess. Only a Spawner that implements
	// TerminalSpawner is given one.
	Terminal *proc.Terminal
	// EndWithLeader, when set, kills what the command leaves running (`cmd &`, setsid
	// and nohup children) as soon as its leader exits, before the process settles: a
	// call allowed once (an approved escalation) leaves nothing behind. Prepare sets
	// it (bash-sandbox); the Supervisor's Spawner honours it.
	EndWithLeader bool
}

// Limits are the bounds of one spawn.
type Limits struct {
	// Stdout and Stderr bound the capture of each stream (the in-memory tail and the
	// spill file).
	Stdout, Stderr proc.Capture
	// GraceMs is the time between SIGTERM and SIGKILL when the tree is killed, and the
	// bound on draining the output after the leader exits.
	GraceMs int64
	// Deadline, when not zero, kills the tree when it passes (a timeout). The spawn's
	// context aborts it.
	Deadline time.Time
	// Resources are the resource limits of the tree and of its owner's session
	// (Options.Resources); a spawner that cannot enforce them must fail the spawn
	// rather than ignore them.
	Resources proc.ResourceLimits
}

// Process is one spawned command tree as a Spawner hands it to the core. All methods
// must be safe for concurrent use.
type Process interface {
	// Pid is the leader's process id on the host that runs it.
	Pid() int
	// Done is closed once the process has settled: it ended, its output is complete,
	// and Exit reports how.
	Done() <-chan struct{}
	// Exit returns how the process ended, and false until Done is closed. Err is set
	// when the process's supervision failed (a lost connection): Result returns it.
	Exit() (proc.Exit, bool)
	// Kill ends the whole tree (SIGTERM, then SIGKILL after the grace period). It
	// returns false once the process has settled and is idempotent.
	Kill() bool
	// Stdout and Stderr are the captured streams.
	Stdout() *proc.Stream
	Stderr() *proc.Stream
}

// Spawner starts the processes of an Executor: the local one is the subprocess
// Supervisor's (Supervisor.Spawner); a remote executor brings its own. Spawn starts cmd within lim; cancelling ctx later aborts the
// process (proc.ReasonAbort). A failure to start that belongs to the call — a missing
// working directory, a missing program, no connection — is returned as (or wrapping) a
// *proc.SpawnError: the core then hands out a settled handle carrying it (see
// Executor.Execute). Any other error fails Execute itself.
type Spawner interface {
	Spawn(ctx context.Context, cmd Command, lim Limits) (Process, error)
}

// TerminalSpawner is a Spawner that can run commands under a terminal
// (Command.Terminal): the Executor over it implements shell.Terminals.
type TerminalSpawner interface {
	Spawner
	Terminals() bool
}

// TerminalProcess is the Process of a command spawned with Command.Terminal: its
// output is Stdout (Stderr stays empty), and its input goes to the terminal (see
// shell.Input, whose methods these are).
type TerminalProcess interface {
	Process
	WriteInput(ctx context.Context, p []byte) error
	CloseInput(ctx context.Context) error
	Resize(proc.Terminal) error
	WaitingForInput() (waiting, known bool)
}

// DetachableProcess is a Process whose deadline and context can be taken back (see
// shell.Detacher): the Executor's executions are Detachers only over one.
type DetachableProcess interface {
	Process
	Detach() bool
}

// FinishFunc post-processes the result of one call (sandbox facts, denial detection).
// It runs once, when the result is first built.
type FinishFunc func(res *shell.RunResult)

// PrepareFunc runs in Execute after the spec was checked, before anything is spawned.
// It may rewrite cmd. An error fails Execute and nothing runs (a sandbox that cannot
// confine must refuse rather than run unconfined). The returned FinishFunc, if not
// nil, post-processes the call's RunResult.
type PrepareFunc func(ctx context.Context, spec shell.ExecSpec, cmd *Command) (FinishFunc, error)

// Options customise an Executor.
type Options struct {
	// Name prefixes errors and validation messages ("bash-local", "bash-sandbox"): the
	// executor's catalog name.
	Name string
	// SandboxMode is what Executor.SandboxMode reports: "" for a non-confining
	// executor, else its default mode.
	SandboxMode string
	// BaseDir returns the directory that a relative Config.Cwd resolves against, and the
	// default workdir when Config.Cwd is empty. nil means the harness's working
	// directory. A remote executor returns a directory on its host (the remote home).
	BaseDir func() (string, error)
	// Prepare, when set, runs before every spawn (see PrepareFunc).
	Prepare PrepareFunc
	// Resources are the resource limits every command runs under (LimitsConfig), passed
	// to the Spawner with each spawn (Limits.Resources); zero for none.
	Resources proc.ResourceLimits
}

// Executor runs `bash -c` commands through a Spawner. It implements shell.Executor and
// holds no process state of its own: processes belong to the service behind the
// Spawner (the subprocess service, the ssh service), so an Executor — and the plugin
// activation that made it — can go away while its executions keep running and stay
// readable through their handles.
type Executor struct {
	sp   Spawner
	cfg  Config
	opts Options
}

var (
	_ shell.Executor = (*Executor)(nil)
	_ shell.Limited  = (*Executor)(nil)
)

// New checks cfg (messages prefixed with opts.Name) and returns an Executor over sp.
func New(sp Spawner, cfg Config, opts Options) (*Executor, error) {
	if opts.Name == "" {
		opts.Name = "bash"
	}
	if sp == nil {
		return nil, fmt.Errorf("%s: no spawner", opts.Name)
	}
	if err := cfg.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", opts.Name, err)
	}
	if opts.BaseDir == nil {
		opts.BaseDir = os.Getwd
		if cfg.Cwd != "" && !filepath.IsAbs(cfg.Cwd) {
			// A relative cwd is the harness's working directory's, as it was at start.
			abs, err := filepath.Abs(cfg.Cwd)
			if err != nil {
				return nil, fmt.Errorf("%s: cwd: %w", opts.Name, err)
			}
			cfg.Cwd = abs
		}
	}
	return &Executor{sp: sp, cfg: cfg, opts: opts}, nil
}

// SandboxMode is Options.SandboxMode.
func (e *Executor) SandboxMode() string { return e.opts.SandboxMode }

// Terminals reports whether the Spawner can run commands under a terminal.
func (e *Executor) Terminals() bool {
	ts, ok := e.sp.(TerminalSpawner)
	return ok && ts.Terminals()
}

// Name is the executor's catalog name (Options.Name): what a trace's command span is
// named after.
func (e *Executor) Name() string { return e.opts.Name }

// ResourceLimits is Options.Resources (shell.Limited).
func (e *Executor) ResourceLimits() proc.ResourceLimits { return e.opts.Resources }

// Resolve turns a request into an explicit spec. It is the only place defaults and caps
// apply: the timeout defaults to Config.TimeoutMs and is clamped to MaxTimeoutMs (NaN or
// ≤ 0 is an error naming request.timeoutMs); the workdir is the request's (a relative
// one resolved against the configured cwd), else the configured cwd, else the base
// directory (Options.BaseDir); Expiry defaults to kill; Stdin, Env, DshEnv and Sandbox
// are carried (copied) only when given; a command containing a NUL byte is refused.
// An ExpiryNone spec has TimeoutMs 0: no deadline; an ExpiryHandOver spec has its
// TimeoutMs resolved as for ExpiryKill, and no deadline either. A terminal takes the
// default size where the request leaves it zero.
func (e *Executor) Resolve(req shell.ExecRequest) (shell.ExecSpec, error) {
	name := e.opts.Name
	if strings.IndexByte(req.Command, 0) >= 0 {
		return shell.ExecSpec{}, fmt.Errorf("%s: invalid command: it contains a NUL byte", name)
	}
	expiry := req.Expiry
	switch expiry {
	case "":
		expiry = shell.ExpiryKill
	case shell.ExpiryKill, shell.ExpiryNone, shell.ExpiryHandOver:
	default:
		return shell.ExecSpec{}, fmt.Errorf("%s: request.expiry must be %q, %q or %q, got %q", name, shell.ExpiryKill, shell.ExpiryNone, shell.ExpiryHandOver, expiry)
	}
	term, err := e.resolveTerminal(req)
	if err != nil {
		return shell.ExecSpec{}, err
	}
	timeout := e.cfg.TimeoutMs
	if req.TimeoutMs != nil {
		t := *req.TimeoutMs
		if math.IsNaN(t) || t <= 0 {
			return shell.ExecSpec{}, fmt.Errorf("%s: request.timeoutMs must be a positive number, got %v", name, t)
		}
		timeout = t
	}
	timeout = min(timeout, e.cfg.MaxTimeoutMs)
	maxBytes := toInt(e.cfg.MaxOutputBytes, 1<<62)
	if req.StdoutMaxBytes != nil {
		if *req.StdoutMaxBytes <= 0 {
			return shell.ExecSpec{}, fmt.Errorf("%s: request.stdoutMaxBytes must be positive, got %d", name, *req.StdoutMaxBytes)
		}
		maxBytes = *req.StdoutMaxBytes
	}
	workdir := filepath.Clean(req.Workdir)
	if !filepath.IsAbs(req.Workdir) {
		// The base directory is only looked up when the request's workdir needs it.
		base := e.cfg.Cwd
		if base == "" || !filepath.IsAbs(base) {
			dir, err := e.opts.BaseDir()
			if err != nil {
				return shell.ExecSpec{}, fmt.Errorf("%s: working directory: %w", name, err)
			}
			base = filepath.Join(dir, base)
		}
		workdir = base
		if req.Workdir != "" {
			workdir = filepath.Join(base, req.Workdir)
		}
	}
	spec := shell.ExecSpec{
		Command:        req.Command,
		Workdir:        workdir,
		StdoutMaxBytes: maxBytes,
		Expiry:         expiry,
		Env:            maps.Clone(req.Env),
		DshEnv:         maps.Clone(req.DshEnv),
		SessionID:      req.SessionID,
		Terminal:       term,
	}
	if expiry != shell.ExpiryNone {
		spec.TimeoutMs = toInt(timeout, maxMs)
	}
	if req.Stdin != nil {
		s := *req.Stdin
		spec.Stdin = &s
	}
	if req.Sandbox != nil {
		p := *req.Sandbox
		spec.Sandbox = &p
	}
	return spec, nil
}

// resolveTerminal is the request's terminal with its size explicit (nil for none), or
// why it cannot be had: an executor without terminals, a size out of range, stdin bytes
// beside a terminal.
func (e *Executor) resolveTerminal(req shell.ExecRequest) (*proc.Terminal, error) {
	name := e.opts.Name
	if req.Terminal == nil {
		return nil, nil
	}
	if !e.Terminals() {
		return nil, fmt.Errorf("%s: this executor cannot run commands under a terminal", name)
	}
	if req.Stdin != nil {
		return nil, fmt.Errorf("%s: request.stdin cannot be given with a terminal: write the input to the terminal", name)
	}
	t := *req.Terminal
	if t.Cols == 0 {
		t.Cols = shell.DefaultTerminalCols
	}
	if t.Rows == 0 {
		t.Rows = shell.DefaultTerminalRows
	}
	if err := t.Check(); err != nil {
		return nil, fmt.Errorf("%s: request.terminal: %w", name, err)
	}
	return &t, nil
}

// Execute starts spec and returns its handle. It fails only for a spec Resolve did not
// produce, an already-cancelled ctx ("aborted before spawn: …"), a Prepare error or a
// Spawner that cannot spawn at all (closed). A start the host refuses (missing workdir,
// missing bash, no connection: a *proc.SpawnError) is not an Execute error: the
// handle settles killed with the failure as its only stderr output, once, and Result
// returns the failure. The deadline (ExpiryKill) counts from here; cancelling ctx
// aborts the call.
func (e *Executor) Execute(ctx context.Context, spec shell.ExecSpec) (shell.Execution, error) {
	name := e.opts.Name
	switch {
	case spec.Expiry != shell.ExpiryKill && spec.Expiry != shell.ExpiryNone && spec.Expiry != shell.ExpiryHandOver:
		return nil, fmt.Errorf("%s: spec is not resolved: expiry %q", name, spec.Expiry)
	case spec.Expiry != shell.ExpiryNone && spec.TimeoutMs <= 0:
		return nil, fmt.Errorf("%s: spec is not resolved: timeoutMs %d", name, spec.TimeoutMs)
	case spec.StdoutMaxBytes <= 0:
		return nil, fmt.Errorf("%s: spec is not resolved: stdoutMaxBytes %d", name, spec.StdoutMaxBytes)
	case !filepath.IsAbs(spec.Workdir):
		return nil, fmt.Errorf("%s: spec is not resolved: workdir %q is not absolute", name, spec.Workdir)
	case spec.Terminal != nil && (spec.Terminal.Check() != nil || spec.Stdin != nil || !e.Terminals()):
		return nil, fmt.Errorf("%s: spec is not resolved: terminal %+v", name, *spec.Terminal)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: aborted before spawn: %w", name, context.Cause(ctx))
	}
	lim := Limits{GraceMs: toInt(e.cfg.GraceMs, maxGraceMs), Resources: e.opts.Resources}
	timeoutMs := spec.TimeoutMs
	if spec.Expiry == shell.ExpiryKill {
		lim.Deadline = time.Now().Add(time.Duration(spec.TimeoutMs) * time.Millisecond)
	}
	// Both streams share the one per-stream cap: a model-visible call is bounded the
	// same way whichever stream the output arrives on.
	capture := proc.Capture{MaxBytes: spec.StdoutMaxBytes, SpillMaxBytes: toInt(e.cfg.MaxSpillBytes, 1<<62)}
	lim.Stdout, lim.Stderr = capture, capture
	cmd := &Command{Argv: []string{"bash", "-c", spec.Command}, Dir: spec.Workdir, Env: spec.Env, DshEnv: spec.DshEnv, Owner: spec.SessionID}
	if spec.Terminal != nil {
		t := *spec.Terminal
		cmd.Terminal = &t
		cmd.Env = terminalEnv(spec.Env)
	}
	if spec.Stdin != nil {
		cmd.Stdin = append(make([]byte, 0, len(*spec.Stdin)), *spec.Stdin...)
	}
	var finish FinishFunc
	if e.opts.Prepare != nil {
		f, err := e.opts.Prepare(ctx, spec, cmd)
		if err != nil {
			return nil, err
		}
		finish = f
	}
	p, err := e.sp.Spawn(ctx, *cmd, lim)
	if err != nil {
		var se *proc.SpawnError
		if errors.As(err, &se) {
			return failed(name, err), nil
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	x := &execution{name: name, process: p, timeoutMs: timeoutMs, finish: finish}
	if spec.Terminal == nil {
		return x, nil
	}
	tp, ok := p.(TerminalProcess)
	if !ok {
		p.Kill()
		return nil, fmt.Errorf("%s: the spawner started a terminal command without a terminal", name)
	}
	return &terminalExecution{execution: x, tty: tp}, nil
}

// terminalEnv is env with TERM set for a terminal (a TERM of the caller's own wins).
func terminalEnv(env map[string]string) map[string]string {
	out := make(map[string]string, len(env)+1)
	out["TERM"] = shell.TerminalTERM
	maps.Copy(out, env)
	return out
}
