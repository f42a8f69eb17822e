package bashsandbox_test

// The real stack: tools, prompt, subprocess, shell-env, jobs, the executor row (id
// `bash`: bash-sandbox, or bash-local), tool-bash and approval, mounted in a
// container.Runtime; the bash tool is called through tools.Registry.CallMap with a
// container.Session whose Cwd is a workspace directory.

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/approval"
	bashlocal "github.com/dsh-dev/dsh/plugins/bashlocal"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
	"github.com/dsh-dev/dsh/plugins/jobs"
	"github.com/dsh-dev/dsh/plugins/prompt"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/plugins/tools"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// catalog holds every plugin the stack tests mount, plus extra ones.
func catalog(t testing.TB, extra ...container.Plugin) *container.Catalog {
	t.Helper()
	cat, err := container.NewCatalog(append([]container.Plugin{
		tools.Plugin, prompt.Plugin, subprocess.Plugin, shellenv.Plugin, jobs.Plugin,
		bashsandbox.Plugin, bashlocal.Plugin, toolbash.Plugin, approval.Plugin,
	}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// stackSetup chooses the rows' configuration.
type stackSetup struct {
	executor   string         // the `bash` row's plugin; default "@deepseek-ai/dsh-bash-sandbox"
	bashConfig map[string]any // merged over {cwd: <configured root>, graceMs: 500}
	approval   string         // approval policy; "" = no approval row
	subprocess map[string]any // the subprocess row's config (e.g. spillRoot)
	extraRows  []container.Row
	extra      []container.Plugin
}

type stack struct {
	rt      *container.Runtime
	tools   *tools.Registry
	prompts *prompt.Registry
	root    string // the executor's configured cwd (canonical)
	home    string // shell-env's dshHome
}

// openStacks are the runtimes of the stacks not closed yet.
var openStacks sync.Map

func stackRows(s stackSetup, root, home string) []container.Row {
	executor := s.executor
	if executor == "" {
		executor = "@deepseek-ai/dsh-bash-sandbox"
	}
	bashCfg := map[string]any{"cwd": root, "graceMs": 500}
	maps.Copy(bashCfg, s.bashConfig)
	rows := []container.Row{
		{ID: "tools", Plugin: "tools"},
		{ID: "prompt", Plugin: "prompt"},
		{ID: "subprocess", Plugin: "subprocess", Config: s.subprocess},
		{ID: "shell-env", Plugin: "shell-env", Config: map[string]any{"dshHome": home}},
		{ID: "jobs", Plugin: "jobs"},
		{ID: "bash", Plugin: executor, Config: bashCfg},
		{ID: "tool-bash", Plugin: "tool-bash"},
	}
	if s.approval != "" {
		rows = append(rows, container.Row{ID: "approval", Plugin: "approval", Config: map[string]any{"policy": s.approval}})
	}
	return append(rows, s.extraRows...)
}

// newStack composes the stack, every row of which must be active.
func newStack(t *testing.T, s stackSetup) *stack {
	t.Helper()
	st := newStackRows(t, s)
	st.lookup(t)
	return st
}

// newStackRows composes without requiring every row to be active; closing the runtime
// at the end must leave no process.
func newStackRows(t *testing.T, s stackSetup) *stack {
	t.Helper()
	rt := container.NewRuntime(catalog(t, s.extra...), container.Options{Logger: quietLogger()})
	st := &stack{rt: rt, root: canonTempDir(t), home: t.TempDir()}
	openStacks.Store(rt, true)
	t.Cleanup(func() {
		openStacks.Delete(rt)
		rt.Close()
		waitFor(t, "no child process left behind", func() bool {
			// The boxes of stacks still open may live on.
			allowed := map[string]bool{}
			openStacks.Range(func(k, _ any) bool {
				if v, ok := container.Lookup(k.(*container.Runtime), subprocess.Service); ok {
					for _, pid := range bashsandbox.BoxPids(v) {
						allowed[strconv.Itoa(pid)] = true
					}
				}
				return true
			})
			for _, c := range children() {
				if !allowed[c] {
					return false
				}
			}
			return true
		})
	})
	if err := rt.Compose("sandbox-test", stackRows(s, st.root, st.home)); err != nil {
		t.Fatal(err)
	}
	return st
}

func (st *stack) lookup(t testing.TB) {
	t.Helper()
	for _, row := range st.rt.Status().Rows {
		if row.State != container.StateActive {
			t.Fatalf("row %s (%s) is %s: %s (missing %v)", row.ID, row.Plugin, row.State, row.Error, row.Missing)
		}
	}
	tv, _ := container.Lookup(st.rt, tools.Service)
	st.tools = tv
	pv, _ := container.Lookup(st.rt, prompt.Service)
	st.prompts = pv
}

// bash calls the bash tool with command and further arguments (name, value pairs).
func (st *stack) bash(t testing.TB, s *container.Session, command string, kv ...any) tools.Result {
	t.Helper()
	args := map[string]any{"command": command, "description": "Run a sandbox test command"}
	for i := 0; i+1 < len(kv); i += 2 {
		args[kv[i].(string)] = kv[i+1]
	}
	return st.tools.CallMap(context.Background(), "bash", args, s)
}

func (st *stack) call(t testing.TB, s *container.Session, tool, args string) tools.Result {
	t.Helper()
	raw, err := tools.DecodeArgs(json.RawMessage(args))
	if err != nil {
		t.Fatal(err)
	}
	return st.tools.CallMap(context.Background(), tool, raw, s)
}

// expect asserts a result's exact text and error flag.
func expect(t testing.TB, res tools.Result, text string, isError bool) {
	t.Helper()
	if res.Text != text || res.IsError != isError {
		t.Fatalf("result:\n got %q (isError %v)\nwant %q (isError %v)", res.Text, res.IsError, text, isError)
	}
}

// sandboxOf returns the typed result's sandbox facts as JSON.
func sandboxOf(t testing.TB, res tools.Result) string {
	t.Helper()
	v, ok := res.Value.(toolbash.ForegroundValue)
	if !ok {
		t.Fatalf("value %T (%q)", res.Value, res.Text)
	}
	b, err := json.Marshal(v.Sandbox)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sandboxJSON is the expected typed sandbox value.
func sandboxJSON(mode string, denied bool, enforcement string, runnerFailed bool) string {
	b, _ := json.Marshal(toolbash.SandboxValue{Mode: mode, Denied: denied, Enforcement: enforcement, RunnerFailed: runnerFailed})
	return string(b)
}

// enforcement is what this host enforces under network with the namespace backend
// (every guarantee on this kernel: "full").
func enforcement(network string) string {
	if len(bashsandbox.Missing(bashsandbox.BackendNamespaces, bashsandbox.KernelABI(), network, true)) == 0 {
		return bashsandbox.EnforcementFull
	}
	return bashsandbox.EnforcementPartial
}

// deniedText is the exact text of a denied command whose only output is stderr line
// errLine, under mode, with the escalation hint (the bash tool advertises escalation
// under bash-sandbox) and exit code 1: the bash tool's marker order.
func deniedText(errLine, mode string) string {
	return "[stderr]\n" + errLine + "\n" + deniedMarker(mode) + "\n" + escalationHint + "\n[exit code: 1]"
}

// Contract strings the bash tool renders and contributes, byte for byte.
const (
	escalationHint = "[sandbox: escalation available — retry this exact command once with sandbox_permissions " +
		"(the narrowest wider mode that suffices) + justification; the approval prompt asks the user]"
	bashPrompt = "Check the [exit code: N] marker on every bash result; investigate failures before moving on."
)

// deniedMarker is the denial line under mode.
func deniedMarker(mode string) string { return "[sandbox: file access denied under " + mode + " mode]" }

// bashPath is how bash's messages name it: the executors run it as "bash".
func bashPath(testing.TB) string { return "bash" }

func canonTempDir(t testing.TB) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// outsideTempDir makes a directory outside the host's temp dir (which the namespace
// backend masks from confined commands): under the user's cache directory (or home),
// removed at the end.
func outsideTempDir(t testing.TB, pattern string) string {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		base, err = os.UserHomeDir()
	}
	if err != nil {
		t.Skipf("no directory outside the temp dirs: %v", err)
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Skipf("no directory outside the temp dirs: %v", err)
	}
	dir, err := os.MkdirTemp(base, pattern)
	if err != nil {
		t.Skipf("no directory outside the temp dirs: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	canon, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return canon
}

// workspace is a session workspace outside the temp dirs, with a readme.
func workspace(t testing.TB) string {
	t.Helper()
	ws := outsideTempDir(t, "dsh-sandbox-ws-")
	if err := os.WriteFile(filepath.Join(ws, "readme"), []byte("workspace file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return ws
}

func session(id, cwd string) *container.Session {
	return &container.Session{ID: id, Cwd: cwd}
}

// prompter answers every question with answer and records the questions.
type prompter struct {
	answer container.Answer
	err    error

	mu        sync.Mutex
	questions []string
}

func (p *prompter) Confirm(_ context.Context, message string) (container.Answer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.questions = append(p.questions, message)
	return p.answer, p.err
}

func (p *prompter) asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.questions...)
}

// jobsPrompt is the text of the stack's tool:jobs section ("" when absent); the jobs
// package owns and pins it.
func jobsPrompt(st *stack) string {
	for _, s := range st.prompts.Sections() {
		if s.Name == "tool:jobs" {
			return s.Text
		}
	}
	return ""
}
