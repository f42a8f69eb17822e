package hooks_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/approval"
	"github.com/dsh-dev/dsh/plugins/hooks"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/plugins/tools"
)

func TestMain(m *testing.M) { proctest.Main(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// harness composes the registry, the subprocess service, shell-env, approval, a hooks
// row and a `bash` tool that records the commands it ran (it runs nothing).
type harness struct {
	t    testing.TB
	rt   *container.Runtime
	ws   string
	home string

	mu  sync.Mutex
	ran []string
}

// fakeBash is the bash tool's schema and a tool that only records.
func (h *harness) fakeBash() container.Plugin {
	return container.Define(container.Declaration[container.NoConfig]{
		Name:   "fake-bash",
		Inject: container.Keys{tools.Service},
		Apply: func(a *container.Activation, _ container.NoConfig) error {
			reg, _ := container.Injected(a, tools.Service)
			schema := &tools.Schema{Type: "object", Required: []string{"command", "description"}, Properties: tools.Properties{
				{Name: "command", Schema: &tools.Schema{Type: "string"}},
				{Name: "description", Schema: &tools.Schema{Type: "string"}},
			}}
			for _, name := range []string{"bash", "job_list"} {
				if err := reg.Register(a, tools.Tool{Name: name, InputSchema: schema, Execute: func(_ context.Context, call tools.Call) (tools.Result, error) {
					cmd, _ := call.Args["command"].(string)
					h.mu.Lock()
					h.ran = append(h.ran, cmd)
					h.mu.Unlock()
					return tools.Result{Text: "ran " + cmd, Value: map[string]any{"exitCode": 0}}, nil
				}}); err != nil {
					return err
				}
			}
			return nil
		},
	})
}

func newHarness(t testing.TB, config map[string]any, extraRows ...container.Row) *harness {
	t.Helper()
	return newHarnessIn(t, t.TempDir(), config, extraRows...)
}

// newHarnessIn is newHarness with the workspace, and the profile's directory, ws.
func newHarnessIn(t testing.TB, ws string, config map[string]any, extraRows ...container.Row) *harness {
	t.Helper()
	proctest.NoLeftovers(t)
	h := &harness{t: t, ws: ws, home: t.TempDir()}
	cat, err := container.NewCatalog(tools.Plugin, subprocess.Plugin, shellenv.Plugin, approval.Plugin, hooks.Plugin, h.fakeBash())
	if err != nil {
		t.Fatal(err)
	}
	h.rt = container.NewRuntime(cat, container.Options{Logger: quiet})
	t.Cleanup(h.rt.Close)
	rows := []container.Row{
		{ID: "tools", Plugin: "tools"},
		{ID: "subprocess", Plugin: "subprocess"},
		{ID: "shell-env", Plugin: "shell-env", Config: map[string]any{"dshHome": h.home}},
		{ID: "approval", Plugin: "approval"},
		{ID: "fake-bash", Plugin: "fake-bash"},
		{ID: "hooks", Plugin: "hooks", Config: config, Source: filepath.Join(h.ws, "dsh.yaml")},
	}
	if err := h.rt.Compose("test", append(rows, extraRows...)); err != nil {
		t.Fatal(err)
	}
	for _, r := range h.rt.Status().Rows {
		if r.State != container.StateActive {
			t.Fatalf("row %s is %s: %s", r.ID, r.State, r.Error)
		}
	}
	return h
}

// session is a session whose workspace is the harness's, answering approvals with a.
func (h *harness) session(a container.Answer) *container.Session {
	return &container.Session{ID: "s-" + strings.ReplaceAll(h.t.Name(), "/", "-"), Cwd: h.ws, Prompter: &prompter{answer: a}}
}

func (h *harness) call(s *container.Session, tool, command string) tools.Result {
	h.t.Helper()
	reg, ok := container.Lookup(h.rt, tools.Service)
	if !ok {
		h.t.Fatal("no registry")
	}
	args, _ := json.Marshal(map[string]any{"command": command, "description": "d"})
	return reg.Call(context.Background(), tool, args, s)
}

func (h *harness) commands() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ran...)
}

// prompter answers every question with answer, counting them.
type prompter struct {
	answer container.Answer
	mu     sync.Mutex
	asked  []string
}

func (p *prompter) Confirm(_ context.Context, m string) (container.Answer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, m)
	return p.answer, nil
}

func (p *prompter) questions() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.asked...)
}

// script writes an executable hook script into dir and returns its path.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/bash\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func pre(hooksList ...map[string]any) map[string]any {
	l := make([]any, len(hooksList))
	for i, h := range hooksList {
		l[i] = h
	}
	return map[string]any{"preToolUse": l}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

func until(cond func() bool) bool { return proctest.Until(10*time.Second, cond) }

func gone(pid int) bool { return proctest.Gone(pid) }
