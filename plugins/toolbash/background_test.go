package toolbash_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/shell"
)

const bgSleep = `{"command":"sleep 60","description":"Sleep a minute","run_in_background":true}`

func TestBackgroundFlowFake(t *testing.T) {
	h := newHarness(t, setup{})
	s, n := newSession("s1", "/w")
	other, _ := newSession("s2", "/w")

	ctx, cancel := context.WithCancel(context.Background())
	res := h.tools.Call(ctx, "bash", json.RawMessage(`{"command":"make build","description":"Build it","run_in_background":true,"timeoutMs":5}`), s)
	expect(t, res, "started background job bash-1", false)
	if v, ok := res.Value.(toolbash.BackgroundValue); !ok || v != (toolbash.BackgroundValue{Kind: "background", JobID: "bash-1"}) {
		t.Fatalf("value = %#v", res.Value)
	}
	req := h.exec.lastRequest(t)
	if req.Expiry != shell.ExpiryNone || req.TimeoutMs != nil || req.Workdir != "/w" || req.DshEnv["DSH_SESSION_ID"] != "s1" {
		t.Fatalf("background request = %+v", req)
	}
	// The call's context is not wired to the process after the start.
	cancel()
	e := h.exec.execution(t, 0)
	if isDone(e) {
		t.Fatal("cancelling the starting call's context killed the job")
	}

	expect(t, h.callTool(t, s, "job_output", `{"job_id":"bash-1"}`), "(no new output)\n[status: running]", false)
	e.write("compiling\n")
	expect(t, h.callTool(t, s, "job_output", `{"job_id":"bash-1"}`), "compiling\n[status: running]", false)
	expect(t, h.callTool(t, s, "job_output", `{"job_id":"bash-1"}`), "(no new output)\n[status: running]", false)
	e.write("lost")
	e.lossy = true
	expect(t, h.callTool(t, s, "job_output", `{"job_id":"bash-1"}`), "lost\n[some output was dropped from memory; full output: /spill/out]\n[status: running]", false)
	expect(t, h.callTool(t, other, "job_output", `{"job_id":"bash-1"}`), "Error: job bash-1 belongs to another session", true)
	expect(t, h.callTool(t, s, "job_list", `{}`), "bash-1 [bash] running — make build", false)

	e.write("done\n")
	e.exit(0)
	expect(t, h.callTool(t, s, "job_output", `{"job_id":"bash-1","wait":true}`), "done\n[status: completed, exit code: 0]", false)
	expect(t, h.callTool(t, s, "job_kill", `{"job_id":"bash-1"}`), "job bash-1 had already finished [status: completed, exit code: 0]", false)

	expect(t, h.call(t, s, bgSleep), "started background job bash-2", false)
	expect(t, h.callTool(t, s, "job_kill", `{"job_id":"bash-2"}`), "requested cancellation of job bash-2", false)
	expect(t, h.callTool(t, s, "job_output", `{"job_id":"bash-2","wait":true}`), "(no new output)\n[status: killed, signal: SIGTERM]", false)
	expect(t, h.callTool(t, s, "job_list", `{}`), "bash-1 [bash] completed — make build\nbash-2 [bash] killed — sleep 60", false)
	// A job that ended before its read began waiting was announced, once; one whose
	// terminal status a waiting read returned was not (covered deterministically in
	// the jobs package).
	seen := map[string]bool{}
	for _, text := range n.get() {
		id := strings.Fields(text)[2]
		if seen[id] || !strings.HasSuffix(text, "]. Read its output with job_output.") {
			t.Fatalf("notices = %q", n.get())
		}
		seen[id] = true
	}
}

func isDone(e *fakeExecution) bool {
	select {
	case <-e.Done():
		return true
	default:
		return false
	}
}

func TestBackgroundOutcomesAndNotice(t *testing.T) {
	h := newHarness(t, setup{mode: "read-only"})
	s, n := newSession("s1", "/w")
	expect(t, h.call(t, s, `{"command":"kill -TERM $$","description":"Kill itself","run_in_background":true}`), "started background job bash-1", false)
	h.exec.execution(t, 0).settle(shell.RunResult{Signal: "SIGTERM"}, nil)
	waitFor(t, 10*time.Second, "the notice", func() bool { return len(n.get()) == 1 })
	want := "background job bash-1 (bash: kill -TERM $$) finished [status: killed, signal: SIGTERM]. Read its output with job_output."
	if got := n.get()[0]; got != want {
		t.Fatalf("notice = %q\nwant     %q", got, want)
	}
	expect(t, h.callTool(t, s, "job_output", `{"job_id":"bash-1"}`), "(no new output)\n[status: killed, signal: SIGTERM]", false)
	if len(n.get()) != 1 {
		t.Fatal("a second notice was sent")
	}

	// A spawn that failed after start settles killed without a signal.
	expect(t, h.call(t, s, `{"command":"ls","description":"List","run_in_background":true}`), "started background job bash-2", false)
	e := h.exec.execution(t, 1)
	e.write("spawn failed: chdir /nope: ENOENT\n")
	e.settle(shell.RunResult{}, fmt.Errorf("spawn failed"))
	expect(t, h.callTool(t, s, "job_output", `{"job_id":"bash-2","wait":true}`), "spawn failed: chdir /nope: ENOENT\n[status: killed, killed before exit]", false)

	// A denial under confinement is carried into the job's output once.
	expect(t, h.call(t, s, `{"command":"touch /x","description":"Touch","run_in_background":true}`), "started background job bash-3", false)
	e = h.exec.execution(t, 2)
	e.write("touch: cannot touch '/x': Permission denied\n")
	e.settle(shell.RunResult{ExitCode: intp(1), Sandbox: &shell.SandboxFacts{Mode: "read-only", Denied: true}}, nil)
	expect(t, h.callTool(t, s, "job_output", `{"job_id":"bash-3","wait":true}`),
		"touch: cannot touch '/x': Permission denied\n[sandbox: file access denied under read-only mode]\n"+toolbash.EscalationHint+"\n[status: completed, exit code: 1]", false)
	expect(t, h.callTool(t, s, "job_output", `{"job_id":"bash-3"}`), "(no new output)\n[status: completed, exit code: 1]", false)
}

func TestBackgroundLimit(t *testing.T) {
	h := newHarness(t, setup{})
	s, _ := newSession("s1", "/w")
	for i := 1; i <= 10; i++ {
		expect(t, h.call(t, s, bgSleep), fmt.Sprintf("started background job bash-%d", i), false)
	}
	expect(t, h.call(t, s, bgSleep), "Error: background job limit reached for this owner (limit: 10); use job_kill to stop an unneeded job, wait for it to finish, then retry", true)
	if got := h.exec.requestCount(); got != 10 {
		t.Fatalf("the refused start reached the executor (%d requests)", got)
	}
	other, _ := newSession("s2", "/w")
	expect(t, h.call(t, other, bgSleep), "started background job bash-11", false)
	lines := strings.Split(h.callTool(t, s, "job_list", `{}`).Text, "\n")
	if len(lines) != 10 || lines[9] != "bash-10 [bash] running — sleep 60" {
		t.Fatalf("job_list = %q", lines)
	}
}

// Item 6 (fake executor): jobs outlive restarts of the tool-bash and executor fibers;
// ending the session disposes them.
func TestJobsSurviveRestartsFake(t *testing.T) {
	h := newHarness(t, setup{})
	s, _ := newSession("s1", "/w")
	expect(t, h.call(t, s, bgSleep), "started background job bash-1", false)
	e := h.exec.execution(t, 0)
	e.write("before\n")

	rows := func(toolCfg, shellCfg map[string]any) []container.Row {
		return []container.Row{
			{ID: "tools", Plugin: "tools"}, {ID: "prompt", Plugin: "prompt"},
			{ID: "shell-env", Plugin: "shell-env", Config: map[string]any{"dshHome": "/dsh/home"}},
			{ID: "tool-bash", Plugin: "tool-bash", Config: toolCfg},
			{ID: "jobs", Plugin: "jobs"},
			{ID: "bash", Plugin: "fake-shell", Config: shellCfg},
		}
	}
	if err := h.rt.Compose("test", rows(map[string]any{"enableRunInBackground": true}, nil)); err != nil {
		t.Fatal(err)
	}
	if err := h.rt.Compose("test", rows(map[string]any{"enableRunInBackground": true}, map[string]any{"gen": 2})); err != nil {
		t.Fatal(err)
	}
	for _, row := range h.rt.Status().Rows {
		if row.State != container.StateActive {
			t.Fatalf("row %s is %s", row.ID, row.State)
		}
	}
	if isDone(e) {
		t.Fatal("a restart killed the job")
	}
	expect(t, h.callTool(t, s, "job_list", `{}`), "bash-1 [bash] running — sleep 60", false)
	expect(t, h.callTool(t, s, "job_output", `{"job_id":"bash-1"}`), "before\n[status: running]", false)
	expect(t, h.call(t, s, bgSleep), "started background job bash-2", false)

	h.rt.EndSession("s1")
	if !isDone(e) || !isDone(h.exec.execution(t, 1)) {
		t.Fatal("ending the session did not kill its jobs")
	}
	expect(t, h.callTool(t, s, "job_list", `{}`), "(no background jobs)", false)
	expect(t, h.callTool(t, s, "job_output", `{"job_id":"bash-1"}`), "Error: unknown job bash-1", true)
}

func TestNoSessionBackgroundIsUnowned(t *testing.T) {
	h := newHarness(t, setup{})
	expect(t, h.call(t, nil, bgSleep), "started background job bash-1", false)
	s, _ := newSession("any", "/")
	expect(t, h.callTool(t, s, "job_list", `{}`), "bash-1 [bash] running — sleep 60", false)
	expect(t, h.callTool(t, nil, "job_kill", `{"job_id":"bash-1","reason":"done"}`), "requested cancellation of job bash-1", false)
	var v map[string]any
	b, _ := json.Marshal(h.callTool(t, nil, "job_output", `{"job_id":"bash-1","wait":true}`).Value)
	_ = json.Unmarshal(b, &v)
	if !reflect.DeepEqual(v, map[string]any{"jobId": "bash-1", "kind": "bash", "label": "sleep 60", "status": "killed", "detail": "signal: SIGTERM", "output": ""}) {
		t.Fatalf("job_output value = %v", v)
	}
}
