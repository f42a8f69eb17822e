// Package bashexec is the executor core shared by the bash executors (bash-local, and
// bash-sandbox on top of it): the common Config, Resolve (the only place defaults and
// caps apply) and an Executor that runs `bash -c <command>` through the subprocess
// Supervisor and projects one process handle into the shell seam's Execution.
//
// A confining executor customises it with Options.Prepare, which may rewrite the argv
// and environment before the spawn (wrap the command in a launcher) and return a
// function that adds sandbox facts to the RunResult.
package bashexec

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/dsh-dev/dsh/plugins/shell"
	"github.com/dsh-dev/dsh/plugins/subprocess"
)

// Command is what will be spawned for one call. Options.Prepare may rewrite it.
type Command struct {
	// Argv starts as [<bash>, "-c", <command>], <bash> being the absolute path found in
	// PATH. A confining executor wraps it, e.g. [<self>, <hidden-arg>, <policy>, "--",
	// <bash>, "-c", <command>].
	Argv []string
	// Dir is the working directory (the spec's Workdir).
	Dir string
	// Env and DshEnv are the spec's ordinary and managed variables (nil when absent).
	// Prepare may replace them; it must not modify the maps it was given in place.
	Env    map[string]string
	DshEnv map[string]string
	// Start, when set, starts the command's leader in place of the Supervisor's own
	// fork and exec (a sandbox that is the leader's parent); see subprocess.Starter.
	Start subprocess.Starter
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
	// Name prefixes errors and validation messages ("bash-local", "bash-sandbox").
	Name string
	// SandboxMode is what Executor.SandboxMode reports: "" for a non-confining
	// executor, else its default mode.
	SandboxMode string
	// Prepare, when set, runs before every spawn (see PrepareFunc).
	Prepare PrepareFunc
}

// Executor runs `bash -c` commands through a subprocess Supervisor. It implements
// shell.Executor. It holds no process state of its own: executions belong to the
// Supervisor, so an Executor (and the plugin activation that made it) can go away while
// its executions keep running and stay readable through their handles.
type Executor struct {
	sup     *subprocess.Supervisor
	cfg     Config
	opts    Options
	cwd     string // absolute config cwd, or "" for the process cwd
	bash    string
	bashErr error
}

var _ shell.Executor = (*Executor)(nil)

// New checks cfg (messages prefixed with opts.Name) and locates bash in PATH, once. A
// missing bash does not fail New: every execution then fails as an infrastructure
// error, which is what the caller of a call must see.
func New(sup *subprocess.Supervisor, cfg Config, opts Options) (*Executor, error) {
	if opts.Name == "" {
		opts.Name = "bash"
	}
	if sup == nil {
		return nil, fmt.Errorf("%s: no subprocess supervisor", opts.Name)
	}
	if err := cfg.Check(opts.Name); err != nil {
		return nil, err
	}
	e := &Executor{sup: sup, cfg: cfg, opts: opts}
	if cfg.Cwd != "" {
		abs, err := filepath.Abs(cfg.Cwd)
		if err != nil {
			return nil, fmt.Errorf("%s: cwd: %w", opts.Name, err)
		}
		e.cwd = abs
	}
	bash, err := exec.LookPath("bash")
	if err == nil && !filepath.IsAbs(bash) {
		bash, err = filepath.Abs(bash)
	}
	if err != nil {
		var ee *exec.Error
		if errors.As(err, &ee) {
			err = ee.Err
		}
		e.bashErr = &subprocess.SpawnError{Op: "exec", Path: "bash", Err: err}
	}
	e.bash = bash
	return e, nil
}

// SandboxMode is Options.SandboxMode.
func (e *Executor) SandboxMode() string { return e.opts.SandboxMode }

// Resolve turns a request into an explicit spec. It is the only place defaults and caps
// apply: the timeout defaults to Config.TimeoutMs and is clamped to MaxTimeoutMs (NaN or
// ≤ 0 is an error naming request.timeoutMs); the workdir is the request's (a relative
// one resolved against the configured cwd), else the configured cwd, else the harness's
// working directory; Expiry defaults to kill; Stdin, Env, DshEnv and Sandbox are carried
// (copied) only when given. An ExpiryNone spec has TimeoutMs 0: no deadline.
func (e *Executor) Resolve(req shell.ExecRequest) (shell.ExecSpec, error) {
	name := e.opts.Name
	if strings.IndexByte(req.Command, 0) >= 0 {
		return shell.ExecSpec{}, fmt.Errorf("%s: invalid command: it contains a NUL byte", name)
	}
	expiry := req.Expiry
	switch expiry {
	case "":
		expiry = shell.ExpiryKill
	case shell.ExpiryKill, shell.ExpiryNone:
	default:
		return shell.ExecSpec{}, fmt.Errorf("%s: request.expiry must be %q or %q, got %q", name, shell.ExpiryKill, shell.ExpiryNone, expiry)
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
	base := e.cwd
	if base == "" {
		wd, err := os.Getwd()
		if err != nil {
			return shell.ExecSpec{}, fmt.Errorf("%s: working directory: %w", name, err)
		}
		base = wd
	}
	workdir := base
	if req.Workdir != "" {
		workdir = req.Workdir
		if !filepath.IsAbs(workdir) {
			workdir = filepath.Join(base, workdir)
		}
		workdir = filepath.Clean(workdir)
	}
	spec := shell.ExecSpec{
		Command:        req.Command,
		Workdir:        workdir,
		StdoutMaxBytes: maxBytes,
		Expiry:         expiry,
		Env:            maps.Clone(req.Env),
		DshEnv:         maps.Clone(req.DshEnv),
		SessionID:      req.SessionID,
	}
	if expiry == shell.ExpiryKill {
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

// Execute starts spec and returns its handle. It fails only for a spec Resolve did not
// produce, an already-cancelled ctx ("aborted before spawn: …"), a closed Supervisor,
// or a Prepare error. A spawn the operating system refuses (missing workdir, missing
// bash) is not an Execute error: the handle settles killed with "spawn failed: …" on
// its stderr, and Result returns the failure. The deadline (ExpiryKill) counts from
// here; cancelling ctx aborts the call.
func (e *Executor) Execute(ctx context.Context, spec shell.ExecSpec) (shell.Execution, error) {
	name := e.opts.Name
	switch {
	case spec.Expiry != shell.ExpiryKill && spec.Expiry != shell.ExpiryNone:
		return nil, fmt.Errorf("%s: spec is not resolved: expiry %q", name, spec.Expiry)
	case spec.Expiry == shell.ExpiryKill && spec.TimeoutMs <= 0:
		return nil, fmt.Errorf("%s: spec is not resolved: timeoutMs %d", name, spec.TimeoutMs)
	case spec.StdoutMaxBytes <= 0:
		return nil, fmt.Errorf("%s: spec is not resolved: stdoutMaxBytes %d", name, spec.StdoutMaxBytes)
	case !filepath.IsAbs(spec.Workdir):
		return nil, fmt.Errorf("%s: spec is not resolved: workdir %q is not absolute", name, spec.Workdir)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: aborted before spawn: %w", name, context.Cause(ctx))
	}
	var deadline time.Time
	timeoutMs := int64(0)
	if spec.Expiry == shell.ExpiryKill {
		timeoutMs = spec.TimeoutMs
		deadline = time.Now().Add(time.Duration(spec.TimeoutMs) * time.Millisecond)
	}
	if e.bashErr != nil {
		return failed(name, e.bashErr), nil
	}
	cmd := &Command{Argv: []string{e.bash, "-c", spec.Command}, Dir: spec.Workdir, Env: spec.Env, DshEnv: spec.DshEnv}
	var finish FinishFunc
	if e.opts.Prepare != nil {
		f, err := e.opts.Prepare(ctx, spec, cmd)
		if err != nil {
			return nil, err
		}
		finish = f
	}
	var stdin []byte
	if spec.Stdin != nil {
		stdin = append(make([]byte, 0, len(*spec.Stdin)), *spec.Stdin...)
	}
	capture := subprocess.Capture{MaxBytes: spec.StdoutMaxBytes, SpillMaxBytes: toInt(e.cfg.MaxSpillBytes, 1<<62)}
	proc, err := e.sup.Spawn(ctx, subprocess.Spec{
		Argv:     cmd.Argv,
		Dir:      cmd.Dir,
		Env:      cmd.Env,
		DshEnv:   cmd.DshEnv,
		Stdin:    stdin,
		Stdout:   capture,
		Stderr:   capture,
		GraceMs:  toInt(e.cfg.GraceMs, maxGraceMs),
		Deadline: deadline,
		Start:    cmd.Start,
	})
	if err != nil {
		var se *subprocess.SpawnError
		if errors.As(err, &se) {
			return failed(name, se), nil
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &execution{name: name, proc: proc, timeoutMs: timeoutMs, finish: finish}, nil
}
