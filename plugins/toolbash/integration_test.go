package toolbash_test

// Integration tests: the real executor (bash-local over subprocess) mounted in a
// container runtime with the tools, prompt, shell-env, jobs and tool-bash rows.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
	bashlocal "github.com/dsh-dev/dsh/plugins/bashlocal"
	"github.com/dsh-dev/dsh/plugins/jobs"
	"github.com/dsh-dev/dsh/plugins/prompt"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/plugins/tools"
)

type realHarness struct {
	rt    *container.Runtime
	tools *tools.Registry
	home  string // dshHome
	cwd   string // bash-local's configured cwd
}

type realSetup struct {
	toolConfig       map[string]any
	subprocessConfig map[string]any
	bashConfig       map[string]any
	noBashRow        bool
}

func realRows(h *realHarness, s realSetup) []container.Row {
	bashCfg := map[string]any{"cwd": h.cwd, "graceMs": 500}
	for k, v := range s.bashConfig {
		bashCfg[k] = v
	}
	rows := []container.Row{
		{ID: "tools", Plugin: "tools"},
		{ID: "prompt", Plugin: "prompt"},
		{ID: "subprocess", Plugin: "subprocess", Config: s.subprocessConfig},
		{ID: "shell-env", Plugin: "@deepseek-ai/dsh-shell-env", Config: map[string]any{"dshHome": h.home}},
		{ID: "jobs", Plugin: "jobs"},
		{ID: "tool-bash", Plugin: "@deepseek-ai/dsh-tool-bash", Config: s.toolConfig},
	}
	if !s.noBashRow {
		rows = append(rows, container.Row{ID: "bash", Plugin: "@deepseek-ai/dsh-bash-local", Config: bashCfg})
	}
	return rows
}

func newReal(t testing.TB, s realSetup) *realHarness {
	t.Helper()
	cat, err := container.NewCatalog(tools.Plugin, prompt.Plugin, subprocess.Plugin, bashlocal.Plugin,
		shellenv.Plugin, jobs.Plugin, toolbash.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{Logger: quietLogger()})
	h := &realHarness{rt: rt, home: t.TempDir(), cwd: t.TempDir()}
	t.Cleanup(func() {
		rt.Close()
		assertNoChildren(t)
	})
	if err := rt.Compose("integration", realRows(h, s)); err != nil {
		t.Fatal(err)
	}
	v, ok := container.Lookup(rt, tools.Service)
	if !ok {
		t.Fatal("no tools service")
	}
	h.tools = v
	if !s.noBashRow {
		if _, ok := h.tools.Tool("bash"); !ok {
			t.Fatalf("bash tool not registered: %+v", rt.Status())
		}
	}
	return h
}

func (h *realHarness) call(t testing.TB, s *container.Session, tool, args string) tools.Result {
	t.Helper()
	return h.tools.Call(context.Background(), tool, json.RawMessage(args), s)
}

func bashArgs(command string, extra ...string) string {
	c, _ := json.Marshal(command)
	parts := append([]string{`"command":` + string(c), `"description":"Run a test command"`}, extra...)
	return "{" + strings.Join(parts, ",") + "}"
}

// assertNoChildren fails t if this process still has a child ten seconds on.
func assertNoChildren(t testing.TB) {
	t.Helper()
	if !proctest.Until(10*time.Second, func() bool { return len(proctest.Children()) == 0 }) {
		t.Errorf("processes left behind: %s", proctest.Describe(proctest.Children()))
	}
}

// alive reports whether pid still exists, a zombie too: a reaped process is not alive.
func alive(pid int) bool { return proctest.State(pid) != 0 }

var readPid = proctest.WaitPidFile

// Item 2: the rendering table through real calls.
func TestRealSpecTable(t *testing.T) {
	h := newReal(t, realSetup{})
	s, _ := newSession("table", h.cwd)
	cases := []struct {
		args string
		want string
	}{
		{bashArgs("echo hello"), "hello\n"},
		{bashArgs("true"), "(no output)"},
		{bashArgs("echo out; echo err >&2"), "out\n[stderr]\nerr\n"},
		{bashArgs("echo failing; exit 3"), "failing\n[exit code: 3]"},
		{bashArgs("sleep 60", `"timeoutMs":100`), "(no output)\n[timed out after 100ms]\n[killed by signal: SIGTERM]"},
	}
	for _, tc := range cases {
		res := h.call(t, s, "bash", tc.args)
		expect(t, res, tc.want, false)
	}
	// The typed value of a nonzero exit and of a timeout.
	b, _ := json.Marshal(h.call(t, s, "bash", bashArgs("echo failing; exit 3")).Value)
	if string(b) != `{"kind":"foreground","exitCode":3,"signal":null,"timedOut":false,"aborted":false,"timeoutMs":120000,"stdout":{"text":"failing\n","truncated":false},"stderr":{"text":"","truncated":false}}` {
		t.Fatalf("value = %s", b)
	}
	b, _ = json.Marshal(h.call(t, s, "bash", bashArgs("sleep 60", `"timeoutMs":100`)).Value)
	if string(b) != `{"kind":"foreground","exitCode":null,"signal":"SIGTERM","timedOut":true,"aborted":false,"timeoutMs":100,"stdout":{"text":"","truncated":false},"stderr":{"text":"","truncated":false}}` {
		t.Fatalf("timeout value = %s", b)
	}
}

func TestRealTruncation(t *testing.T) {
	h := newReal(t, realSetup{bashConfig: map[string]any{"maxOutputBytes": 1000}})
	res := h.call(t, nil, "bash", bashArgs("seq 1 5000"))
	if res.IsError {
		t.Fatal(res.Text)
	}
	i := strings.LastIndex(res.Text, "\n[output truncated; full output: ")
	if i < 0 || !strings.HasSuffix(res.Text, "]") || !strings.HasSuffix(res.Text[:i], "5000\n") {
		t.Fatalf("truncated text = %q", res.Text)
	}
	path := strings.TrimSuffix(res.Text[i+len("\n[output truncated; full output: "):], "]")
	full, err := os.ReadFile(path)
	if err != nil || !strings.HasPrefix(string(full), "1\n2\n3\n") || !strings.HasSuffix(string(full), "4999\n5000\n") {
		t.Fatalf("spill file %q: %v (%d bytes)", path, err, len(full))
	}
	v := res.Value.(toolbash.ForegroundValue)
	if !v.Stdout.Truncated || v.Stdout.SpillPath != path || len(v.Stdout.Text) > 1000 {
		t.Fatalf("value stdout = truncated %v path %q len %d", v.Stdout.Truncated, v.Stdout.SpillPath, len(v.Stdout.Text))
	}
}

// Item 8: the managed environment, in the foreground and the background; an ambient
// DSH_SESSION_ID cannot spoof it.
func TestRealManagedEnv(t *testing.T) {
	t.Setenv("DSH_SESSION_ID", "spoofed")
	t.Setenv("DSH_SHELL", "0")
	t.Setenv("DSH_EXTRA", "leak")
	h := newReal(t, realSetup{})
	s, n := newSession("sess-42", h.cwd)
	const cmd = `echo $DSH_SESSION_ID $DSH_SHELL $DSH_HOME "${DSH_EXTRA-unset}"`
	want := fmt.Sprintf("sess-42 1 %s unset\n", h.home)
	expect(t, h.call(t, s, "bash", bashArgs(cmd)), want, false)
	// The model cannot inject environment either.
	expect(t, h.call(t, s, "bash", bashArgs(cmd, `"env":{"DSH_SESSION_ID":"model"}`, `"stdin":"x"`)), "[ignored unknown arguments: env, stdin]\n"+want, false)
	expect(t, h.call(t, s, "bash", bashArgs(cmd, `"run_in_background":true`)), "started background job bash-1", false)
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-1","wait":true,"timeout_ms":10000}`), want+"[status: completed, exit code: 0]", false)
	// The job may finish before the read starts waiting; then its one notice was sent.
	if len(n.get()) > 1 {
		t.Fatalf("notices = %q", n.get())
	}
	// No session: no DSH_SESSION_ID at all.
	expect(t, h.call(t, nil, "bash", bashArgs(`echo "${DSH_SESSION_ID-none}"`)), "none\n", false)
}

// Item 4: workdir through the real executor.
func TestRealWorkdir(t *testing.T) {
	h := newReal(t, realSetup{})
	a, _ := newSession("a", t.TempDir())
	b, _ := newSession("b", t.TempDir())
	for _, dir := range []string{filepath.Join(a.Cwd, "sub", "dir"), filepath.Join(b.Cwd, "other")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	abs := t.TempDir()
	cases := []struct {
		s    *container.Session
		args string
		want string
	}{
		{a, bashArgs("pwd"), a.Cwd + "\n"},
		{b, bashArgs("pwd"), b.Cwd + "\n"},
		{a, bashArgs("pwd", `"workdir":"sub/dir"`), filepath.Join(a.Cwd, "sub", "dir") + "\n"},
		{b, bashArgs("pwd", `"workdir":"other"`), filepath.Join(b.Cwd, "other") + "\n"},
		{a, bashArgs("pwd", `"workdir":"`+abs+`"`), abs + "\n"},
		{a, bashArgs("cd /; pwd"), "/\n"},
		{a, bashArgs("pwd"), a.Cwd + "\n"}, // no state persisted from the cd
		{nil, bashArgs("pwd"), h.cwd + "\n"},
	}
	for _, tc := range cases {
		expect(t, h.call(t, tc.s, "bash", tc.args), tc.want, false)
	}
	res := h.call(t, a, "bash", bashArgs("pwd", `"workdir":"missing"`))
	if !res.IsError || !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, "ENOENT") {
		t.Fatalf("missing workdir = %q (isError %v)", res.Text, res.IsError)
	}
}

// Item 5: background jobs through the real executor.
func TestRealBackground(t *testing.T) {
	h := newReal(t, realSetup{})
	s, n := newSession("owner", h.cwd)
	other, _ := newSession("other", h.cwd)

	expect(t, h.call(t, s, "bash", bashArgs("echo one; echo two >&2", `"run_in_background":true`)), "started background job bash-1", false)
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-1","wait":true,"timeout_ms":10000}`), "one\n[stderr]\ntwo\n[status: completed, exit code: 0]", false)
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-1"}`), "(no new output)\n[status: completed, exit code: 0]", false)

	// Reads consume.
	gate := filepath.Join(t.TempDir(), "gate")
	expect(t, h.call(t, s, "bash", bashArgs(fmt.Sprintf("echo first; while [ ! -e %s ]; do sleep 0.02; done; echo second; exit 4", gate), `"run_in_background":true`)), "started background job bash-2", false)
	var got string
	waitFor(t, 10*time.Second, "the first line", func() bool {
		got += strings.TrimSuffix(h.call(t, s, "job_output", `{"job_id":"bash-2"}`).Text, "(no new output)\n[status: running]")
		return strings.Contains(got, "first\n")
	})
	if got != "first\n[status: running]" {
		t.Fatalf("first read = %q", got)
	}
	expect(t, h.call(t, other, "job_output", `{"job_id":"bash-2"}`), "Error: job bash-2 belongs to another session", true)
	expect(t, h.call(t, other, "job_kill", `{"job_id":"bash-2"}`), "Error: job bash-2 belongs to another session", true)
	expect(t, h.call(t, other, "job_list", `{}`), "(no background jobs)", false)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-2","wait":true,"timeout_ms":10000}`), "second\n[status: completed, exit code: 4]", false)

	// job_kill on sleep 60.
	pidFile := filepath.Join(t.TempDir(), "pid")
	expect(t, h.call(t, s, "bash", bashArgs("echo $$ > "+pidFile+"; exec sleep 60", `"run_in_background":true`)), "started background job bash-3", false)
	pid := readPid(t, pidFile)
	expect(t, h.call(t, s, "job_list", `{}`), "bash-1 [bash] completed — echo one; echo two >&2\n"+
		"bash-2 [bash] completed — echo first; while [ ! -e "+gate+" ]; do sleep 0.02; done; echo second; exit 4\n"+
		"bash-3 [bash] running — echo $$ > "+pidFile+"; exec sleep 60", false)
	expect(t, h.call(t, s, "job_kill", `{"job_id":"bash-3","reason":"not needed"}`), "requested cancellation of job bash-3", false)
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-3","wait":true,"timeout_ms":10000}`), "(no new output)\n[status: killed, signal: SIGTERM]", false)
	if alive(pid) {
		t.Fatalf("killed job's process %d still alive", pid)
	}
	expect(t, h.call(t, s, "job_kill", `{"job_id":"bash-3"}`), "job bash-3 had already finished [status: killed, signal: SIGTERM]", false)

	// A command that kills itself.
	expect(t, h.call(t, s, "bash", bashArgs("kill -TERM $$", `"run_in_background":true`)), "started background job bash-4", false)
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-4","wait":true,"timeout_ms":10000}`), "(no new output)\n[status: killed, signal: SIGTERM]", false)

	// Item 7: a job nobody read reports through the owner's notifier.
	expect(t, h.call(t, s, "bash", bashArgs("echo quiet", `"run_in_background":true`)), "started background job bash-5", false)
	// (Jobs 1–4 may have finished before their first read, so notices for them are
	// allowed; bash-5 must get exactly one.)
	const notice5 = "background job bash-5 (bash: echo quiet) finished [status: completed, exit code: 0]. Read its output with job_output."
	count5 := func() int {
		c := 0
		for _, text := range n.get() {
			if text == notice5 {
				c++
			} else if !strings.HasPrefix(text, "background job bash-") || !strings.HasSuffix(text, "]. Read its output with job_output.") {
				t.Fatalf("malformed notice %q", text)
			}
		}
		return c
	}
	waitFor(t, 10*time.Second, "the completion notice", func() bool { return count5() == 1 })
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-5"}`), "quiet\n[status: completed, exit code: 0]", false)
	if count5() != 1 {
		t.Fatalf("notices = %q", n.get())
	}
}

func TestRealBackgroundLimit(t *testing.T) {
	h := newReal(t, realSetup{})
	s, _ := newSession("owner", h.cwd)
	for i := 1; i <= 10; i++ {
		expect(t, h.call(t, s, "bash", bashArgs("exec sleep 60", `"run_in_background":true`)), fmt.Sprintf("started background job bash-%d", i), false)
	}
	expect(t, h.call(t, s, "bash", bashArgs("exec sleep 60", `"run_in_background":true`)),
		"Error: background job limit reached for this owner (limit: 10); use job_kill to stop an unneeded job, wait for it to finish, then retry", true)
	expect(t, h.call(t, s, "job_kill", `{"job_id":"bash-10"}`), "requested cancellation of job bash-10", false)
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-10","wait":true,"timeout_ms":10000}`), "(no new output)\n[status: killed, signal: SIGTERM]", false)
	expect(t, h.call(t, s, "bash", bashArgs("exec sleep 60", `"run_in_background":true`)), "started background job bash-11", false)
	// Item 6: ending the session cancels, awaits and deletes its jobs.
	h.rt.EndSession("owner")
	expect(t, h.call(t, s, "job_list", `{}`), "(no background jobs)", false)
	assertNoChildren(t)
}

func TestRealBackgroundDisabledAndUnavailable(t *testing.T) {
	h := newReal(t, realSetup{toolConfig: map[string]any{"enableRunInBackground": false}})
	tool, _ := h.tools.Tool("bash")
	if got := propertyNames(tool.InputSchema); strings.Join(got, ",") != "command,description,timeoutMs,workdir,tty" {
		t.Fatalf("properties = %q", got)
	}
	expect(t, h.call(t, nil, "bash", bashArgs("true", `"run_in_background":true`)), "Error: background execution is disabled for this bash tool", true)

	h2 := newReal(t, realSetup{})
	if err := h2.rt.Unmount("jobs"); err != nil {
		t.Fatal(err)
	}
	expect(t, h2.call(t, nil, "bash", bashArgs("true", `"run_in_background":true`)), "Error: background jobs unavailable: load the jobs plugin", true)
	expect(t, h2.call(t, nil, "bash", bashArgs("true")), "(no output)", false)
}

// Item 6: jobs survive restarts of the tool-bash fiber and of the executor fiber, and
// finish with their full output.
func TestRealJobsSurviveRestarts(t *testing.T) {
	h := newReal(t, realSetup{})
	s, _ := newSession("owner", h.cwd)
	gate := filepath.Join(t.TempDir(), "gate")
	cmd := fmt.Sprintf("echo before; while [ ! -e %s ]; do sleep 0.02; done; echo after", gate)
	expect(t, h.call(t, s, "bash", bashArgs(cmd, `"run_in_background":true`)), "started background job bash-1", false)
	pidFile := filepath.Join(t.TempDir(), "pid")
	expect(t, h.call(t, s, "bash", bashArgs("echo $$ > "+pidFile+"; exec sleep 60", `"run_in_background":true`)), "started background job bash-2", false)
	pid := readPid(t, pidFile)

	// Restart tool-bash (config change), then the executor (config change).
	if err := h.rt.Compose("integration", realRows(h, realSetup{toolConfig: map[string]any{"enableRunInBackground": true}})); err != nil {
		t.Fatal(err)
	}
	if err := h.rt.Compose("integration", realRows(h, realSetup{toolConfig: map[string]any{"enableRunInBackground": true}, bashConfig: map[string]any{"timeoutMs": 60000}})); err != nil {
		t.Fatal(err)
	}
	for _, row := range h.rt.Status().Rows {
		if row.State != container.StateActive {
			t.Fatalf("row %s is %s (%s)", row.ID, row.State, row.Error)
		}
	}
	if !alive(pid) {
		t.Fatal("a restart killed a job's process")
	}
	expect(t, h.call(t, s, "job_list", `{}`), "bash-1 [bash] running — "+cmd+"\nbash-2 [bash] running — echo $$ > "+pidFile+"; exec sleep 60", false)
	var got string
	waitFor(t, 10*time.Second, "the first line", func() bool {
		got += strings.TrimSuffix(h.call(t, s, "job_output", `{"job_id":"bash-1"}`).Text, "(no new output)\n[status: running]")
		return strings.Contains(got, "before\n")
	})
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-1","wait":true,"timeout_ms":10000}`), "after\n[status: completed, exit code: 0]", false)
	expect(t, h.call(t, s, "job_kill", `{"job_id":"bash-2"}`), "requested cancellation of job bash-2", false)
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-2","wait":true,"timeout_ms":10000}`), "(no new output)\n[status: killed, signal: SIGTERM]", false)
	if alive(pid) {
		t.Fatal("killed after restart, but the process lives")
	}
	// New jobs keep numbering in the same runtime.
	expect(t, h.call(t, s, "bash", bashArgs("true", `"run_in_background":true`)), "started background job bash-3", false)
}

func TestRealEndSessionKillsJobs(t *testing.T) {
	h := newReal(t, realSetup{})
	a, _ := newSession("a", h.cwd)
	b, _ := newSession("b", h.cwd)
	pidA, pidB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	expect(t, h.call(t, a, "bash", bashArgs("echo $$ > "+pidA+"; exec sleep 60", `"run_in_background":true`)), "started background job bash-1", false)
	expect(t, h.call(t, b, "bash", bashArgs("echo $$ > "+pidB+"; exec sleep 60", `"run_in_background":true`)), "started background job bash-2", false)
	pa, pb := readPid(t, pidA), readPid(t, pidB)
	h.rt.EndSession("a")
	if alive(pa) {
		t.Fatal("the ended session's job still runs")
	}
	if !alive(pb) {
		t.Fatal("another session's job was killed")
	}
	expect(t, h.call(t, a, "job_output", `{"job_id":"bash-1"}`), "Error: unknown job bash-1", true)
	expect(t, h.call(t, b, "job_list", `{}`), "bash-2 [bash] running — echo $$ > "+pidB+"; exec sleep 60", false)
}

func TestRealAbort(t *testing.T) {
	h := newReal(t, realSetup{})
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan tools.Result)
	go func() {
		done <- h.tools.Call(ctx, "bash", json.RawMessage(bashArgs("echo $$ > "+pidFile+"; exec sleep 60")), nil)
	}()
	pid := readPid(t, pidFile)
	cancel()
	res := <-done
	expect(t, res, "Error: tool call aborted", true)
	if v, ok := res.Value.(toolbash.ForegroundValue); !ok || !v.Aborted || v.TimedOut {
		t.Fatalf("aborted value = %+v", res.Value)
	}
	if alive(pid) {
		t.Fatal("the aborted command still runs")
	}
}

// Item 9: no shell provider, no bash tool; mounting bash-local registers it.
func TestRealMountExecutorRegistersTool(t *testing.T) {
	h := newReal(t, realSetup{noBashRow: true})
	if _, ok := h.tools.Tool("bash"); ok {
		t.Fatal("bash tool without an executor")
	}
	pv, _ := container.Lookup(h.rt, prompt.Service)
	prompts := pv
	jobsPrompt := sectionText(prompts, "tool:jobs")
	if got := prompts.Compose(nil); jobsPrompt == "" || got != jobsPrompt {
		t.Fatalf("prompt without bash = %q", got)
	}
	if err := h.rt.Mount(container.Row{ID: "bash", Plugin: "bash-local", Config: map[string]any{"cwd": h.cwd}}); err != nil {
		t.Fatal(err)
	}
	expect(t, h.call(t, nil, "bash", bashArgs("echo mounted")), "mounted\n", false)
	if got := prompts.Compose(nil); got != toolbash.PromptText+"\n\n"+jobsPrompt {
		t.Fatalf("prompt = %q", got)
	}
	if err := h.rt.Unmount("tool-bash"); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.tools.Tool("bash"); ok {
		t.Fatal("bash tool survived unmount")
	}
	if got := prompts.Compose(nil); got != jobsPrompt {
		t.Fatalf("prompt after unmount = %q", got)
	}
}

func TestRealLossyBackgroundRead(t *testing.T) {
	h := newReal(t, realSetup{bashConfig: map[string]any{"maxOutputBytes": 1000}})
	s, _ := newSession("owner", h.cwd)
	expect(t, h.call(t, s, "bash", bashArgs("seq 1 5000", `"run_in_background":true`)), "started background job bash-1", false)
	res := h.call(t, s, "job_output", `{"job_id":"bash-1","wait":true,"timeout_ms":10000}`)
	const notice = "\n[some output was dropped from memory; full output: "
	i := strings.Index(res.Text, notice)
	if i < 0 || !strings.HasSuffix(res.Text, "]\n[status: completed, exit code: 0]") || !strings.HasSuffix(res.Text[:i], "4999\n5000") {
		t.Fatalf("lossy read = %q", res.Text)
	}
	path := strings.TrimSuffix(res.Text[i+len(notice):], "]\n[status: completed, exit code: 0]")
	full, err := os.ReadFile(path)
	if err != nil || !strings.HasPrefix(string(full), "1\n2\n") || !strings.HasSuffix(string(full), "5000\n") {
		t.Fatalf("spill %q: %v", path, err)
	}
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-1"}`), "(no new output)\n[status: completed, exit code: 0]", false)
}

// Item 8: a contributor's variable reaches commands while its plugin is active.
func TestRealContributorEnv(t *testing.T) {
	contrib := container.Define(container.Declaration[container.NoConfig]{
		Name:   "env-contrib",
		Inject: container.Keys{shellenv.Service},
		Apply: func(a *container.Activation, _ container.NoConfig) error {
			reg, err := container.Injected(a, shellenv.Service)
			if err != nil {
				return err
			}
			return reg.Register(a, shellenv.Contributor{Name: "test", Variables: map[string]string{"DSH_TEST_VALUE": "a test value"},
				Resolve: func(_ context.Context, call shellenv.Call) (map[string]string, error) {
					return map[string]string{"DSH_TEST_VALUE": "for-" + call.Session.ID}, nil
				}})
		},
	})
	cat, err := container.NewCatalog(tools.Plugin, prompt.Plugin, subprocess.Plugin, bashlocal.Plugin,
		shellenv.Plugin, jobs.Plugin, toolbash.Plugin, contrib)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{Logger: quietLogger()})
	h := &realHarness{rt: rt, home: t.TempDir(), cwd: t.TempDir()}
	t.Cleanup(func() { rt.Close(); assertNoChildren(t) })
	if err := rt.Compose("integration", append(realRows(h, realSetup{}), container.Row{ID: "contrib", Plugin: "env-contrib"})); err != nil {
		t.Fatal(err)
	}
	v, _ := container.Lookup(rt, tools.Service)
	h.tools = v
	s, _ := newSession("s7", h.cwd)
	expect(t, h.call(t, s, "bash", bashArgs(`echo "${DSH_TEST_VALUE-unset}"`)), "for-s7\n", false)
	if err := rt.Unmount("contrib"); err != nil {
		t.Fatal(err)
	}
	expect(t, h.call(t, s, "bash", bashArgs(`echo "${DSH_TEST_VALUE-unset}"`)), "unset\n", false)
}

// sectionText is the text of the named prompt section ("" when absent). The tool:jobs
// text belongs to the jobs package, whose tests pin it.
func sectionText(prompts *prompt.Registry, name string) string {
	for _, s := range prompts.Sections() {
		if s.Name == name {
			return s.Text
		}
	}
	return ""
}
