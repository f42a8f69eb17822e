// Package toolbashtest is the conformance kit of an executor under the real bash tool:
// Run composes the executor as the `bash` row of a harness (tools, prompt, shell-env,
// jobs, tool-bash) and checks what the model sees, one parallel subtest per rule:
//
//   - Renderings: package toolbash's foreground renderings byte for byte (output,
//     [stderr], the exit-code, timeout and signal markers), the typed value, the
//     truncation notice naming a spill file with the whole stream, a failed start as an
//     error.
//   - Background: a job's output read incrementally, its final status, job_kill, and a
//     failed start reported in the job's output.
//   - TTY (an executor with terminals): tty output as text (colours, cursor moves
//     and "\r" rewrites resolved, one stream), a prompt handed over as a job within 2 s
//     and answered with job_write, a REPL ended with ^D, ^C to a tty job, job_write
//     refused to a job without a terminal and to a finished one.
//   - TimeoutHandOver: with onTimeout: background, a command at its timeout continues
//     as a job, every line shown once.
//
// It does not check the seam's contract (package shelltest does: every executor runs
// both kits, with one Target), the tool's argument validation and escalation (package
// toolbash's own tests), the sandbox markers of denied access, or a profile's
// composition and reload. Package shelltest shows an executor's test calling both.
package toolbashtest

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/jobs"
	"github.com/dsh-dev/dsh/plugins/prompt"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/shell"
	"github.com/dsh-dev/dsh/shell/bashexec"
	"github.com/dsh-dev/dsh/shell/shelltest"
)

// Target is the executor under test: the value package shelltest takes, so that one
// serves both kits. Running is not used here (nothing here watches processes).
type Target = shelltest.Target

// Run checks target through the bash tool, one subtest per rule.
func Run(t *testing.T, target Target) {
	t.Helper()
	if target.Name == "" || target.New == nil {
		t.Fatal("toolbashtest: Target needs a Name and New")
	}
	t.Run("Renderings", func(t *testing.T) { t.Parallel(); renderings(t, target) })
	t.Run("Background", func(t *testing.T) { t.Parallel(); background(t, target) })
	t.Run("TTY", func(t *testing.T) { t.Parallel(); terminal(t, target) })
	t.Run("TimeoutHandOver", func(t *testing.T) { t.Parallel(); timeoutHandOver(t, target) })
}

// composition is the executor under test as the `bash` row of a harness: tools,
// prompt, shell-env, jobs and the bash tool.
type composition struct {
	t       *testing.T
	dir     string
	reg     *tools.Registry
	session *container.Session
}

func compose(t *testing.T, target Target, tune func(*bashexec.Config)) *composition {
	t.Helper()
	return composeWith(t, target, tune, nil)
}

// composeWith is compose with the tool-bash row's config.
func composeWith(t *testing.T, target Target, tune func(*bashexec.Config), toolConfig map[string]any) *composition {
	t.Helper()
	ex, policy, cfg := target.Executor(t, tune)
	dir := cfg.Cwd
	cat, err := container.NewCatalog(tools.Plugin, prompt.Plugin, shellenv.Plugin, jobs.Plugin, toolbash.Plugin, executorPlugin(ex, policy))
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(rt.Close)
	err = rt.Compose("toolbashtest", []container.Row{
		{ID: "tools", Plugin: "tools"},
		{ID: "prompt", Plugin: "prompt"},
		{ID: "shell-env", Plugin: "shell-env", Config: map[string]any{"dshHome": t.TempDir()}},
		{ID: "jobs", Plugin: "jobs"},
		{ID: "tool-bash", Plugin: "tool-bash", Config: toolConfig},
		{ID: "bash", Plugin: "toolbashtest-executor"},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg, ok := container.Lookup(rt, tools.Service)
	if !ok {
		t.Fatalf("no tools registry: %+v", rt.Status())
	}
	if _, ok := reg.Tool("bash"); !ok {
		t.Fatalf("the bash tool did not activate over the executor: %+v", rt.Status())
	}
	return &composition{t: t, dir: dir, reg: reg, session: &container.Session{ID: "toolbashtest", Cwd: dir}}
}

// executorPlugin provides ex as the shell service (and policy, when it confines).
func executorPlugin(ex shell.Executor, policy shell.PolicyResolver) container.Plugin {
	provide := container.Keys{shell.Service}
	if policy != nil {
		provide = append(provide, shell.PolicyService)
	}
	return container.Define(container.Declaration[container.NoConfig]{
		Name:      "toolbashtest-executor",
		Provide:   provide,
		Exclusive: container.Keys{shell.Service},
		Apply: func(a *container.Activation, _ container.NoConfig) error {
			if policy != nil {
				if err := shell.PolicyService.Provide(a, policy); err != nil {
					return err
				}
			}
			return shell.Service.Provide(a, ex)
		},
	})
}

func (c *composition) call(tool string, args map[string]any) tools.Result {
	c.t.Helper()
	raw, _ := json.Marshal(args)
	return c.reg.Call(context.Background(), tool, raw, c.session)
}

func (c *composition) bash(command string, extra map[string]any) tools.Result {
	c.t.Helper()
	args := map[string]any{"command": command, "description": "Run a conformance command"}
	for k, v := range extra {
		args[k] = v
	}
	return c.call("bash", args)
}

// gate returns a path in the executor's directory and a function that creates it there
// (through the tool: the directory may be on another host).
func (c *composition) gate(name string) (path string, open func()) {
	path = c.dir + "/" + name
	return path, func() {
		c.t.Helper()
		if res := c.bash("touch "+proctest.Quote(path), nil); res.Text != "(no output)" || res.IsError {
			c.t.Fatalf("touch %s: %q", path, res.Text)
		}
	}
}

// startJob starts command as a background job (with the extra arguments) and returns
// its id.
func (c *composition) startJob(command string, extra map[string]any) string {
	c.t.Helper()
	args := map[string]any{"run_in_background": true}
	for k, v := range extra {
		args[k] = v
	}
	res := c.bash(command, args)
	id, ok := strings.CutPrefix(res.Text, "started background job ")
	if !ok || res.IsError {
		c.t.Fatalf("background start of %q: %q", command, res.Text)
	}
	return id
}

// The foreground renderings, byte for byte, with the typed value, the truncation
// notice and the error of a failed start.
func renderings(t *testing.T, target Target) {
	c := compose(t, target, func(c *bashexec.Config) { c.MaxOutputBytes = 1000 })
	for _, r := range []struct {
		command string
		extra   map[string]any
		text    string
	}{
		{"echo hello", nil, "hello\n"},
		{"true", nil, "(no output)"},
		{"echo out; echo err >&2", nil, "out\n[stderr]\nerr\n"},
		{"printf out; printf err >&2", nil, "out\n[stderr]\nerr"},
		{"echo failing; exit 3", nil, "failing\n[exit code: 3]"},
		{"printf failing; exit 3", nil, "failing\n[exit code: 3]"},
		{"echo err >&2; exit 1", nil, "[stderr]\nerr\n[exit code: 1]"},
		{"sleep 60", map[string]any{"timeoutMs": 100}, "(no output)\n[timed out after 100ms]\n[killed by signal: SIGTERM]"},
		{"kill -TERM $$", nil, "(no output)\n[killed by signal: SIGTERM]"},
	} {
		res := c.bash(r.command, r.extra)
		if res.Text != r.text || res.IsError {
			t.Errorf("%s:\n got %q (isError %v)\nwant %q", r.command, res.Text, res.IsError, r.text)
		}
	}
	res := c.bash("exit 3", nil)
	v, ok := res.Value.(toolbash.ForegroundValue)
	if !ok || v.Kind != toolbash.KindForeground || v.ExitCode == nil || *v.ExitCode != 3 || v.Signal != nil || v.TimedOut || v.Aborted {
		t.Errorf("typed value of exit 3: %#v", res.Value)
	}
	truncation(t, c)
	res = c.bash("echo hi", map[string]any{"workdir": c.dir + "/missing"})
	if !res.IsError || !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, "ENOENT") {
		t.Errorf("foreground call in a missing workdir: %q (isError %v)", res.Text, res.IsError)
	}
}

// truncation checks the notice of a stream over the executor's 1000-byte cap: the
// retained tail, then the path of the spill file (on this host) with the whole stream.
func truncation(t *testing.T, c *composition) {
	out := c.bash("head -c 3000 /dev/zero | tr '\\0' c", nil)
	prefix := strings.Repeat("c", 1000) + "\n[output truncated; full output: "
	path, ok := strings.CutPrefix(out.Text, prefix)
	path, closed := strings.CutSuffix(path, "]")
	if !ok || !closed || out.IsError {
		t.Errorf("truncated rendering: %q", out.Text)
		return
	}
	if path == "" {
		t.Errorf("no spill path in %q", out.Text)
		return
	}
	if data, err := os.ReadFile(path); err != nil || len(data) != 3000 {
		t.Errorf("rendered spill path %s: %d bytes, %v", path, len(data), err)
	}
}

// Background jobs through the jobs runtime: incremental output, the final status, a
// kill, and a failed start reported in the job's output.
func background(t *testing.T, target Target) {
	c := compose(t, target, nil)
	gate, open := c.gate("gate")
	id := c.startJob("echo start; while [ ! -e "+proctest.Quote(gate)+" ]; do sleep 0.01; done; echo end", nil)
	var got strings.Builder
	if !proctest.Until(20*time.Second, func() bool {
		out := c.call("job_output", map[string]any{"job_id": id})
		text, _, _ := strings.Cut(out.Text, "[status: ")
		if text != "(no new output)\n" {
			got.WriteString(text)
		}
		return strings.Contains(got.String(), "start\n")
	}) {
		t.Fatalf("job output %q", got.String())
	}
	if got.String() != "start\n" {
		t.Errorf("incremental job output %q", got.String())
	}
	open()
	out := c.call("job_output", map[string]any{"job_id": id, "wait": true, "timeout_ms": 20000})
	if out.Text != "end\n[status: completed, exit code: 0]" {
		t.Errorf("final job output %q", out.Text)
	}

	id = c.startJob("echo ready; sleep 60", nil)
	if !proctest.Until(20*time.Second, func() bool {
		return strings.HasPrefix(c.call("job_output", map[string]any{"job_id": id}).Text, "ready\n")
	}) {
		t.Fatal("the job never printed ready")
	}
	if kill := c.call("job_kill", map[string]any{"job_id": id}); kill.Text != "requested cancellation of job "+id {
		t.Errorf("job_kill: %q", kill.Text)
	}
	out = c.call("job_output", map[string]any{"job_id": id, "wait": true, "timeout_ms": 20000})
	if out.Text != "(no new output)\n[status: killed, signal: SIGTERM]" {
		t.Errorf("killed job output %q", out.Text)
	}

	res := c.bash("echo hi", map[string]any{"workdir": c.dir + "/missing", "run_in_background": true})
	id, ok := strings.CutPrefix(res.Text, "started background job ")
	if !ok || res.IsError {
		t.Fatalf("background call in a missing workdir: %q", res.Text)
	}
	out = c.call("job_output", map[string]any{"job_id": id, "wait": true})
	if !strings.HasPrefix(out.Text, "[stderr]\n") || !strings.Contains(out.Text, "spawn failed") ||
		!strings.HasSuffix(out.Text, "\n[status: killed, killed before exit]") {
		t.Errorf("job output of a failed start: %q", out.Text)
	}
}
