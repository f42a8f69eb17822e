package toolbash_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/approval"
	"github.com/dsh-dev/dsh/plugins/jobs"
	"github.com/dsh-dev/dsh/plugins/prompt"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/proc"
	"github.com/dsh-dev/dsh/shell"
)

// fakeExec is a scriptable shell.Executor that records every request it resolves.
// Foreground executions settle with behave(spec); nil behave (and every background
// execution) runs until killed or aborted.
type fakeExec struct {
	mode string

	mu         sync.Mutex
	requests   []shell.ExecRequest
	executions []*fakeExecution
	behave     func(spec shell.ExecSpec) (shell.RunResult, error)
	executeErr error
}

func (f *fakeExec) SandboxMode() string { return f.mode }

func (f *fakeExec) Resolve(req shell.ExecRequest) (shell.ExecSpec, error) {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	spec := shell.ExecSpec{Command: req.Command, Workdir: req.Workdir, TimeoutMs: 120000, StdoutMaxBytes: 64000,
		Expiry: shell.ExpiryKill, Stdin: req.Stdin, Env: req.Env, DshEnv: req.DshEnv, Sandbox: req.Sandbox}
	if spec.Workdir == "" {
		spec.Workdir = "/executor/default"
	}
	if req.TimeoutMs != nil {
		spec.TimeoutMs = int64(*req.TimeoutMs)
	}
	if req.Expiry == shell.ExpiryNone {
		spec.Expiry, spec.TimeoutMs = shell.ExpiryNone, 0
	}
	return spec, nil
}

func (f *fakeExec) Execute(ctx context.Context, spec shell.ExecSpec) (shell.Execution, error) {
	f.mu.Lock()
	if f.executeErr != nil {
		f.mu.Unlock()
		return nil, f.executeErr
	}
	behave := f.behave
	e := &fakeExecution{spec: spec, done: make(chan struct{})}
	f.executions = append(f.executions, e)
	f.mu.Unlock()
	if spec.Expiry != shell.ExpiryNone && behave != nil {
		res, err := behave(spec)
		e.settle(res, err)
		return e, nil
	}
	go func() {
		select {
		case <-ctx.Done():
			e.settle(shell.RunResult{Signal: "SIGTERM", Aborted: true, TimeoutMs: spec.TimeoutMs}, nil)
		case <-e.done:
		}
	}()
	return e, nil
}

func (f *fakeExec) lastRequest(t *testing.T) shell.ExecRequest {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) == 0 {
		t.Fatal("no request reached the executor")
	}
	return f.requests[len(f.requests)-1]
}

// reset forgets the recorded requests and executions (long fuzz and benchmark runs).
func (f *fakeExec) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests, f.executions = f.requests[:0], f.executions[:0]
}

func (f *fakeExec) requestCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

func (f *fakeExec) execution(t *testing.T, i int) *fakeExecution {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if i >= len(f.executions) {
		t.Fatalf("no execution %d", i)
	}
	return f.executions[i]
}

// fakeExecution is one fake command.
type fakeExecution struct {
	spec shell.ExecSpec

	mu      sync.Mutex
	pending strings.Builder
	lossy   bool
	done    chan struct{}
	res     shell.RunResult
	err     error
	exited  *proc.Exit // nil while running
	kills   int
}

func (e *fakeExecution) write(s string) {
	e.mu.Lock()
	e.pending.WriteString(s)
	e.mu.Unlock()
}

func (e *fakeExecution) settle(res shell.RunResult, err error) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-e.done:
		return false
	default:
	}
	e.res, e.err = res, err
	e.exited = &proc.Exit{Code: res.ExitCode, Signal: res.Signal, Err: err}
	close(e.done)
	return true
}

func (e *fakeExecution) exit(code int) { e.settle(shell.RunResult{ExitCode: &code}, nil) }

func (e *fakeExecution) Result(ctx context.Context) (shell.RunResult, error) {
	select {
	case <-e.done:
	case <-ctx.Done():
		return shell.RunResult{}, ctx.Err()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.res, e.err
}

func (e *fakeExecution) ReadOutput() shell.ProcessRead {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := shell.ProcessRead{Delta: e.pending.String(), Lossy: e.lossy}
	if e.lossy {
		r.StdoutSpillPath = "/spill/out"
	}
	e.pending.Reset()
	e.lossy = false
	return r
}

func (e *fakeExecution) Kill() bool {
	e.mu.Lock()
	e.kills++
	e.mu.Unlock()
	return e.settle(shell.RunResult{Signal: "SIGTERM"}, nil)
}

func (e *fakeExecution) Done() <-chan struct{} { return e.done }

func (e *fakeExecution) Exit() (proc.Exit, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.exited == nil {
		return proc.Exit{}, false
	}
	return *e.exited, true
}

func (e *fakeExecution) Pid() int { return 0 }

// fakePolicy is a sandboxPolicy: requested, else the session override, else default.
type fakePolicy struct{ def string }

func (p fakePolicy) DefaultMode() string { return p.def }
func (p fakePolicy) Resolve(s *container.Session, requested string) (shell.SandboxPolicy, error) {
	mode, root := p.def, "/configured/root"
	if s != nil && s.SandboxMode != "" {
		mode = s.SandboxMode
	}
	if requested != "" {
		mode = requested
	}
	if s != nil && s.Cwd != "" {
		root = "/canonical" + s.Cwd
	}
	return shell.SandboxPolicy{Mode: mode, WorkspaceRoot: root}, nil
}

// fakeApprover answers every request with outcome and records the requests.
type fakeApprover struct {
	mu       sync.Mutex
	outcome  approval.Outcome
	requests []approval.Request
}

func (a *fakeApprover) Request(_ context.Context, req approval.Request) approval.Outcome {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requests = append(a.requests, req)
	return a.outcome
}

// fakeShellConfig lets a test restart the fake executor's row (a new gen).
type fakeShellConfig struct {
	Gen int `yaml:"gen"`
}

// fakeShellPlugin provides exec as `shell` (and, when it confines, a sandboxPolicy).
func fakeShellPlugin(exec *fakeExec) container.Plugin {
	provide := container.Keys{shell.Service}
	if exec.mode != "" {
		provide = append(provide, shell.PolicyService)
	}
	return container.Define(container.Declaration[*fakeShellConfig]{
		Name:      "fake-shell",
		Provide:   provide,
		Exclusive: container.Keys{shell.Service},
		Config:    func() *fakeShellConfig { return &fakeShellConfig{} },
		Apply: func(a *container.Activation, _ *fakeShellConfig) error {
			if exec.mode != "" {
				if err := shell.PolicyService.Provide(a, fakePolicy{def: exec.mode}); err != nil {
					return err
				}
			}
			return shell.Service.Provide(a, exec)
		},
	})
}

func fakeApprovalPlugin(a *fakeApprover) container.Plugin {
	return container.Define(container.Declaration[container.NoConfig]{Name: "fake-approval", Provide: container.Keys{approval.Service},
		Apply: func(act *container.Activation, _ container.NoConfig) error { return approval.Service.Provide(act, a) }})
}

// notices records completion notices of a session.
type notices struct {
	mu    sync.Mutex
	texts []string
}

func (n *notices) Notify(text string) {
	n.mu.Lock()
	n.texts = append(n.texts, text)
	n.mu.Unlock()
}

func (n *notices) get() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.texts...)
}

func newSession(id, cwd string) (*container.Session, *notices) {
	n := &notices{}
	return &container.Session{ID: id, Cwd: cwd, Notifier: n}, n
}

type harness struct {
	rt    *container.Runtime
	exec  *fakeExec
	tools *tools.Registry
}

type setup struct {
	mode        string         // executor sandbox mode
	toolConfig  map[string]any // tool-bash row config
	noJobs      bool
	approver    *fakeApprover // nil: no approval row
	noShellRow  bool
	extraPlugin []container.Plugin
	extraRows   []container.Row // mounted last, in order
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newHarness(t testing.TB, s setup) *harness {
	t.Helper()
	exec := &fakeExec{mode: s.mode}
	plugins := []container.Plugin{tools.Plugin, prompt.Plugin, shellenv.Plugin, jobs.Plugin, toolbash.Plugin, fakeShellPlugin(exec)}
	if s.approver != nil {
		plugins = append(plugins, fakeApprovalPlugin(s.approver))
	}
	plugins = append(plugins, s.extraPlugin...)
	cat, err := container.NewCatalog(plugins...)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{Logger: quietLogger()})
	t.Cleanup(rt.Close)
	rows := []container.Row{
		{ID: "tools", Plugin: "tools"},
		{ID: "prompt", Plugin: "prompt"},
		{ID: "shell-env", Plugin: "shell-env", Config: map[string]any{"dshHome": "/dsh/home"}},
		{ID: "tool-bash", Plugin: "tool-bash", Config: s.toolConfig},
	}
	if !s.noJobs {
		rows = append(rows, container.Row{ID: "jobs", Plugin: "jobs"})
	}
	if !s.noShellRow {
		rows = append(rows, container.Row{ID: "bash", Plugin: "fake-shell"})
	}
	if s.approver != nil {
		rows = append(rows, container.Row{ID: "approval", Plugin: "fake-approval"})
	}
	rows = append(rows, s.extraRows...)
	if err := rt.Compose("test", rows); err != nil {
		t.Fatal(err)
	}
	v, ok := container.Lookup(rt, tools.Service)
	if !ok {
		t.Fatal("no tools service")
	}
	return &harness{rt: rt, exec: exec, tools: v}
}

func (h *harness) call(t testing.TB, s *container.Session, args string) tools.Result {
	t.Helper()
	return h.tools.Call(context.Background(), "bash", json.RawMessage(args), s)
}

func (h *harness) callTool(t testing.TB, s *container.Session, name, args string) tools.Result {
	t.Helper()
	return h.tools.Call(context.Background(), name, json.RawMessage(args), s)
}

func expect(t testing.TB, res tools.Result, text string, isError bool) {
	t.Helper()
	if res.Text != text || res.IsError != isError {
		t.Fatalf("result = %q (isError %v), want %q (isError %v)", res.Text, res.IsError, text, isError)
	}
}

// waitFor polls cond until it holds, failing t after d.
var waitFor = proctest.WaitFor

func intp(n int) *int { return &n }
