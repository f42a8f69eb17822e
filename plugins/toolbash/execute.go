package toolbash

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/approval"
	"github.com/dsh-dev/dsh/plugins/jobs"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/proc"
	"github.com/dsh-dev/dsh/shell"
)

// bashTool is one registration of the bash tool.
type bashTool struct {
	services   container.Services // call-time services: jobs, approval, sandboxPolicy
	exec       shell.Executor
	env        *shellenv.Registry
	background bool
	sandbox    string            // the executor's default mode; "" when it does not confine
	remote     bool              // the executor runs commands on another host (shell.Remote)
	shaped     map[string]shaped // the tool under each narrowing ceiling (confining only)
	terminals  bool              // the executor runs commands under a terminal (shell.Terminals): tty is offered
	inputWait  time.Duration
	onTimeout  string              // OnTimeoutKill or OnTimeoutBackground
	limits     proc.ResourceLimits // the executor's resource limits (shell.Limited)
}

// bashArgs are the validated named arguments of one call.
type bashArgs struct {
	command       string
	description   string
	timeoutMs     *float64
	workdir       string
	background    bool
	escalate      string // sandbox_permissions
	justification string
	tty           bool
}

// failure is a validation or policy failure: an `Error: <message>` result.
type failure string

func (f failure) result() tools.Result { return tools.Errorf("%s", string(f)) }

// arg returns a declared argument, or an undeclared one the model sent anyway (a field
// the composition does not advertise still has to be refused, not ignored).
func arg(call tools.Call, name string) (any, bool) {
	if v, ok := call.Args[name]; ok {
		return v, true
	}
	v, ok := call.Extra[name]
	return v, ok
}

func nonEmpty(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok && strings.TrimSpace(s) != ""
}

func jsonText(v any) string {
	if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// validate checks a call in the documented order. Nothing has run when it fails.
func (t *bashTool) validate(call tools.Call) (bashArgs, *failure) {
	fail := func(msg string) (bashArgs, *failure) { f := failure(msg); return bashArgs{}, &f }
	var a bashArgs
	var ok bool
	if a.command, ok = nonEmpty(call.Args[argCommand]); !ok {
		return fail("invalid command: expected a non-empty string")
	}
	if a.description, ok = nonEmpty(call.Args[argDescription]); !ok {
		return fail("invalid description: expected a non-empty string")
	}
	if v, given := call.Args[argTimeoutMs]; given {
		f, _ := tools.Number(v)
		if !(f > 0) || math.IsInf(f, 0) {
			return fail("invalid timeoutMs: expected a positive number, got " + jsonText(v))
		}
		a.timeoutMs = &f
	}
	perm, hasPerm := arg(call, argSandboxPermissions)
	just, hasJust := arg(call, argJustification)
	switch {
	case hasPerm && !hasJust:
		return fail("invalid escalation: sandbox_permissions requires a justification")
	case hasJust && !hasPerm:
		return fail("invalid escalation: justification is only valid together with sandbox_permissions")
	case hasJust:
		if a.justification, ok = nonEmpty(just); !ok {
			return fail("invalid justification: expected a non-empty sentence")
		}
		a.justification = strings.TrimSpace(a.justification)
	}
	if hasPerm {
		if t.sandbox == "" {
			return fail("sandbox_permissions is not available in this composition (no sandboxing executor to escalate)")
		}
		a.escalate, _ = perm.(string)
	}
	if v, given := arg(call, argRunInBackground); given {
		if !t.background {
			if v != false {
				return fail("background execution is disabled for this bash tool")
			}
		} else {
			a.background = v == true
		}
	}
	if a.background {
		if _, ok := t.jobs(); !ok {
			return fail("background jobs unavailable: load the jobs plugin")
		}
	}
	if v, given := arg(call, argTTY); given {
		if !t.terminals {
			if v != false {
				return fail("tty is not available in this composition (the executor runs no terminals)")
			}
		} else {
			a.tty = v == true
		}
	}
	a.workdir, _ = call.Args[argWorkdir].(string)
	return a, nil
}

func (t *bashTool) jobs() (*jobs.Runtime, bool) {
	return container.Lookup(t.services, jobs.Service)
}

func (t *bashTool) execute(ctx context.Context, call tools.Call) (tools.Result, error) {
	a, bad := t.validate(call)
	if bad != nil {
		return bad.result(), nil
	}
	c := t.ceiling(call.Session)
	if c.binds() && t.sandbox == "" {
		return c.unkept().result(), nil
	}
	policy, bad, err := t.sandboxPolicy(ctx, call.Session, a, c)
	if err != nil {
		return tools.Result{}, err
	}
	if bad != nil {
		return bad.result(), nil
	}
	snap, err := t.env.Collect(ctx, shellenv.Call{Session: call.Session})
	if err != nil {
		return tools.Result{}, err
	}
	cwdSession := call.Session
	if t.remote {
		cwdSession = nil // a local path: the executor's remote cwd applies instead
	}
	req := shell.ExecRequest{
		Command: a.command,
		Workdir: workdir(cwdSession, policy, a.workdir),
		DshEnv:  snap.Map(),
		Sandbox: policy,
	}
	if call.Session != nil {
		req.SessionID = call.Session.ID
	}
	if a.tty {
		req.Terminal = &shell.Terminal{}
	}
	if a.background {
		return t.startBackground(ctx, call.Session, req, a.tty, c)
	}
	req.TimeoutMs = a.timeoutMs
	return t.runForeground(ctx, call.Session, req, a.tty, c)
}

// workdir applies the session's cwd: the default, and the base of a relative workdir.
// A confining policy's workspace root is the canonical form of that same cwd, so it is
// used instead: confinement and launch then agree on the spelling. With no session cwd
// the executor applies its own default.
func workdir(session *container.Session, policy *shell.SandboxPolicy, requested string) string {
	base := ""
	if session != nil && session.Cwd != "" {
		base = session.Cwd
		if policy != nil && policy.WorkspaceRoot != "" {
			base = policy.WorkspaceRoot
		}
	}
	switch {
	case requested == "":
		return base
	case filepath.IsAbs(requested) || base == "":
		return requested
	}
	return filepath.Join(base, requested)
}

// sandboxPolicy resolves the policy of a call on a confining executor, within the
// session's ceiling c, after the escalation check and approval. It returns nil for
// non-confining executors.
func (t *bashTool) sandboxPolicy(ctx context.Context, session *container.Session, a bashArgs, c ceiling) (*shell.SandboxPolicy, *failure, error) {
	if t.sandbox == "" {
		return nil, nil, nil
	}
	resolver, haveResolver := container.Lookup(t.services, shell.PolicyService)
	effective := t.sandbox
	var current shell.SandboxPolicy
	if haveResolver {
		var err error
		if current, err = resolver.Resolve(session, ""); err != nil {
			return nil, nil, fmt.Errorf("sandbox policy: %w", err)
		}
		effective = current.Mode
	}
	narrowed := !c.allows(effective)
	if narrowed {
		// Narrowed to the ceiling, whatever the default or the session's override say.
		effective = c.max
		if haveResolver {
			var err error
			if current, err = resolver.Resolve(session, effective); err != nil {
				return nil, nil, fmt.Errorf("sandbox policy: %w", err)
			}
		}
	}
	root := ""
	if session != nil {
		root = session.Cwd
	}
	if a.escalate == "" {
		switch {
		case haveResolver:
			return &current, nil, nil
		case narrowed:
			return &shell.SandboxPolicy{Mode: effective, WorkspaceRoot: root}, nil, nil
		}
		return nil, nil, nil
	}
	m := a.escalate
	if shell.ModeRank(m) <= shell.ModeRank(effective) {
		f := failure(fmt.Sprintf("sandbox escalation to %q is not strictly wider than this call's current %q mode", m, effective))
		return nil, &f, nil
	}
	if !c.allows(m) {
		f := c.exceeded(m) // refused before anyone is asked
		return nil, &f, nil
	}
	if f := t.approve(ctx, session, a); f != nil {
		return nil, f, nil
	}
	// Allowed once: nothing the call starts outlives it (Escalated).
	if !haveResolver {
		return &shell.SandboxPolicy{Mode: m, WorkspaceRoot: root, Escalated: true}, nil, nil
	}
	p, err := resolver.Resolve(session, m)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox policy: %w", err)
	}
	p.Escalated = true
	return &p, nil, nil
}

// approve asks the approval service; nil means allowed once.
func (t *bashTool) approve(ctx context.Context, session *container.Session, a bashArgs) *failure {
	m := a.escalate
	fail := func(format string) *failure { f := failure(fmt.Sprintf(format, m)); return &f }
	approver, ok := container.Lookup(t.services, approval.Service)
	if !ok {
		return fail("sandbox escalation to %q requires approval, but no approval service is composed")
	}
	outcome := approver.Request(ctx, approval.Request{
		Session:       session,
		Tool:          toolName,
		Reason:        "escalate sandbox to " + m + ": " + a.justification,
		Command:       a.command,
		Mode:          m,
		Justification: a.justification,
	})
	tools.NoteApproval(ctx, outcome)
	switch outcome {
	case approval.AllowedOnce:
		return nil
	case approval.Rejected:
		return fail("the user rejected escalating this command to %q")
	case approval.Cancelled:
		return fail("approval for escalating to %q was cancelled")
	case approval.Unavailable:
		return fail("sandbox escalation to %q requires approval, but no approval channel is available")
	}
	f := failure(fmt.Sprintf("approval for escalating to %q returned an unknown outcome %q; the command did not run", m, string(outcome)))
	return &f
}

// escalation reports whether a denial under mode gets the escalation hint: the tool
// advertises sandbox_permissions and a wider mode exists within the session's ceiling.
func (t *bashTool) escalation(mode string, c ceiling) bool {
	widest := shell.ModeDangerFullAccess
	if c.binds() {
		widest = c.max
	}
	return t.sandbox != "" && shell.ModeRank(mode) < shell.ModeRank(widest)
}

// runForeground runs a call to its end — or, with the jobs plugin and background
// enabled, until it waits for input (tty) or outlives its timeout (onTimeout:
// background), when it continues as a job (see handover.go).
func (t *bashTool) runForeground(ctx context.Context, session *container.Session, req shell.ExecRequest, tty bool, c ceiling) (tools.Result, error) {
	f := foreground{t: t, session: session, tty: tty, ceiling: c}
	if rt, ok := t.jobs(); ok && t.background {
		f.jobs = rt
		if t.onTimeout == OnTimeoutBackground {
			req.Expiry = shell.ExpiryHandOver
		}
	}
	spec, err := t.exec.Resolve(req)
	if err != nil {
		return tools.Result{}, err
	}
	start := time.Now()
	execution, err := t.exec.Execute(ctx, spec)
	if err != nil {
		return tools.Result{}, err
	}
	f.x, f.spec, f.start = execution, spec, start
	if a, ok := execution.(shell.Activity); ok {
		m := tools.MeterFrom(ctx)
		m.Track(a.OutputBytes)
		m.TrackLine(func() string { return lastLine(a.Tail(lastLineBytes)) })
	}
	return f.run(ctx)
}

// result renders a foreground run that ended (started at start): a terminal's output as text.
func (t *bashTool) result(res shell.RunResult, tty bool, c ceiling, start time.Time) tools.Result {
	if tty {
		res.Stdout.Text = plainText([]byte(res.Stdout.Text))
	}
	mode := ""
	if res.Sandbox != nil {
		mode = res.Sandbox.Mode
	}
	v := valueOf(res)
	v.run.executor, v.run.start, v.run.end = t.executorName(), start, time.Now()
	return tools.Result{Text: render(res, t.escalation(mode, c)), Value: v}
}

func (t *bashTool) startBackground(ctx context.Context, session *container.Session, req shell.ExecRequest, tty bool, c ceiling) (tools.Result, error) {
	rt, ok := t.jobs()
	if !ok {
		return failure("background jobs unavailable: load the jobs plugin").result(), nil
	}
	req.Expiry = shell.ExpiryNone
	snap, err := rt.Start(jobs.Spec{
		Kind:  "bash",
		Label: req.Command,
		Owner: session,
		Run: func() (jobs.Hooks, error) {
			if err := ctx.Err(); err != nil {
				return jobs.Hooks{}, fmt.Errorf("aborted before spawn: %w", err)
			}
			spec, err := t.exec.Resolve(req)
			if err != nil {
				return jobs.Hooks{}, err
			}
			// Detached: cancellation belongs to job_kill and owner disposal, not to
			// this call.
			execution, err := t.exec.Execute(context.WithoutCancel(ctx), spec)
			if err != nil {
				return jobs.Hooks{}, err
			}
			return t.adapt(execution, tty, c), nil
		},
	})
	if err != nil {
		if errors.Is(err, jobs.ErrLimit) || errors.Is(err, jobs.ErrClosed) {
			return tools.Errorf("%v", err), nil
		}
		return tools.Result{}, err
	}
	return tools.Result{Text: "started background job " + snap.ID, Value: BackgroundValue{Kind: KindBackground, JobID: snap.ID}}, nil
}

// adapt turns an execution into job hooks. Reads are consuming; a terminal's output is
// rendered as text; once the command has finished, the first read also carries its
// sandbox facts (denial or runner failure). A command under a terminal takes input.
func (t *bashTool) adapt(e shell.Execution, tty bool, c ceiling) jobs.Hooks {
	var mu sync.Mutex
	noted := false
	var screen *ttyReader
	if tty {
		screen = &ttyReader{}
	}
	h := jobs.Hooks{
		Cancel: func() { e.Kill() },
		Done:   e.Done(),
		ReadOutput: func() string {
			mu.Lock()
			defer mu.Unlock()
			finished := isClosed(e.Done()) // before the read: then the read holds the rest
			text := screen.render(e.ReadOutput(), finished)
			if !finished || noted {
				return text
			}
			noted = true
			res, err := e.Result(context.Background())
			if err != nil || res.Sandbox == nil {
				return text
			}
			lines := sandboxMarkers(res.Sandbox, t.escalation(res.Sandbox.Mode, c))
			if len(lines) == 0 {
				return text
			}
			return withNewline(text) + strings.Join(lines, "\n")
		},
		Outcome: func() jobs.Outcome { return outcomeOf(e.Exit()) },
	}
	if a, ok := e.(shell.Activity); ok {
		h.LastOutput = a.LastOutput
	}
	if in, ok := e.(shell.Input); ok && tty {
		h.Write = inputWriter(in)
	}
	return h
}

// inputWriter is the Write hook of a job under a terminal.
func inputWriter(in shell.Input) func(ctx context.Context, input string, end bool) error {
	return func(ctx context.Context, input string, end bool) error {
		var err error
		if input != "" {
			err = in.WriteInput(ctx, []byte(input))
		}
		if err == nil && end {
			err = in.CloseInput(ctx)
		}
		if errors.Is(err, shell.ErrInputClosed) {
			return fmt.Errorf("%w: %v", jobs.ErrInputClosed, err)
		}
		return err
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
