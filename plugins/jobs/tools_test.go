package jobs_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/jobs"
	"github.com/dsh-dev/dsh/plugins/prompt"
	"github.com/dsh-dev/dsh/plugins/tools"
)

type harness struct {
	rt      *container.Runtime
	tools   *tools.Registry
	prompts *prompt.Registry
	jobs    *jobs.Runtime
}

func compose(t testing.TB, jobsConfig map[string]any) *harness {
	t.Helper()
	cat, err := container.NewCatalog(tools.Plugin, prompt.Plugin, jobs.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{Logger: quietLogger()})
	t.Cleanup(rt.Close)
	if err := rt.Compose("test", []container.Row{
		{ID: "tools", Plugin: "tools"}, {ID: "prompt", Plugin: "prompt"},
		{ID: "jobs", Plugin: "@deepseek-ai/dsh-jobs", Config: jobsConfig},
	}); err != nil {
		t.Fatal(err)
	}
	h := &harness{rt: rt}
	h.tools = mustLookup(t, rt, tools.Service)
	h.prompts = mustLookup(t, rt, prompt.Service)
	h.jobs = mustLookup(t, rt, jobs.Service)
	return h
}

func mustLookup[T any](t testing.TB, rt *container.Runtime, key container.Key[T]) T {
	t.Helper()
	v, ok := container.Lookup(rt, key)
	if !ok {
		t.Fatalf("service %q missing: %+v", key, rt.Status())
	}
	return v
}

func (h *harness) call(t *testing.T, s *container.Session, name, args string) tools.Result {
	t.Helper()
	return h.tools.Call(context.Background(), name, json.RawMessage(args), s)
}

func expect(t *testing.T, res tools.Result, text string, isError bool) {
	t.Helper()
	if res.Text != text || res.IsError != isError {
		t.Fatalf("result = %q (isError %v), want %q (isError %v)", res.Text, res.IsError, text, isError)
	}
}

func TestJobToolsTexts(t *testing.T) {
	h := compose(t, nil)
	s, _ := session("s1")
	other, _ := session("s2")

	expect(t, h.call(t, s, "job_list", `{}`), "(no background jobs)", false)

	w := newWork()
	if _, err := h.jobs.Start(jobs.Spec{Kind: "bash", Label: "npm test", Owner: s, Run: w.run}); err != nil {
		t.Fatal(err)
	}
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-1"}`), "(no new output)\n[status: running]", false)
	w.write("PASS a")
	res := h.call(t, s, "job_output", `{"job_id":"bash-1"}`)
	expect(t, res, "PASS a\n[status: running]", false)
	if v := res.Value.(jobs.OutputValue); v.Output != "PASS a" || v.Status != jobs.StatusRunning || v.JobID != "bash-1" || v.Label != "npm test" {
		t.Fatalf("value = %+v", v)
	}
	w.write("PASS a2")
	// jobId, as bash's structured result spells it, names the job too.
	expect(t, h.call(t, s, "job_output", `{"jobId":"bash-1"}`), "PASS a2\n[status: running]", false)
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-1","jobId":"bash-1"}`), "(no new output)\n[status: running]", false)
	expect(t, h.call(t, s, "job_list", `{}`), "bash-1 [bash] running — npm test", false)
	expect(t, h.call(t, other, "job_list", `{}`), "(no background jobs)", false)
	expect(t, h.call(t, other, "job_output", `{"job_id":"bash-1"}`), "Error: job bash-1 belongs to another session", true)
	expect(t, h.call(t, other, "job_kill", `{"job_id":"bash-1"}`), "Error: job bash-1 belongs to another session", true)
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-7"}`), "Error: unknown job bash-7", true)
	expect(t, h.call(t, s, "job_kill", `{"job_id":"nope"}`), "Error: unknown job nope", true)

	w.write("PASS b\n")
	w.finish(jobs.Outcome{Status: jobs.StatusCompleted, Detail: "exit code: 0"})
	res = h.call(t, s, "job_output", `{"job_id":"bash-1","wait":true}`)
	expect(t, res, "PASS b\n[status: completed, exit code: 0]", false)
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-1"}`), "(no new output)\n[status: completed, exit code: 0]", false)
	expect(t, h.call(t, s, "job_kill", `{"job_id":"bash-1"}`), "job bash-1 had already finished [status: completed, exit code: 0]", false)

	w2 := newWork()
	if _, err := h.jobs.Start(jobs.Spec{Kind: "bash", Label: "sleep 60", Owner: s, Run: w2.run}); err != nil {
		t.Fatal(err)
	}
	res = h.call(t, s, "job_kill", `{"job_id":"bash-2","reason":"no longer needed"}`)
	expect(t, res, "requested cancellation of job bash-2", false)
	if v := res.Value.(jobs.KillValue); v.Result != jobs.KillCancellationRequested {
		t.Fatalf("kill value = %+v", v)
	}
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-2","wait":true,"timeout_ms":10000}`), "(no new output)\n[status: killed, signal: SIGTERM]", false)
	expect(t, h.call(t, s, "job_list", `{}`), "bash-1 [bash] completed — npm test\nbash-2 [bash] killed — sleep 60", false)
}

func TestJobToolsValidation(t *testing.T) {
	h := compose(t, nil)
	s, _ := session("s1")
	for _, tool := range []string{"job_output", "job_kill"} {
		expect(t, h.call(t, s, tool, `{"job_id":""}`), `Error: invalid job_id: expected a non-empty string, got ""`, true)
		expect(t, h.call(t, s, tool, `{"job_id":"  "}`), `Error: invalid job_id: expected a non-empty string, got "  "`, true)
		expect(t, h.call(t, s, tool, `{}`), `Error: missing required property "job_id"`, true)
		expect(t, h.call(t, s, tool, `{"job_id":7}`), `Error: "job_id" must be a string`, true)
	}
	for _, tool := range []string{"job_output", "job_kill"} {
		expect(t, h.call(t, s, tool, `{"jobId":""}`), `Error: invalid job_id: expected a non-empty string, got ""`, true)
		expect(t, h.call(t, s, tool, `{"jobId":7}`), `Error: "jobId" must be a string`, true)
		expect(t, h.call(t, s, tool, `{"job_id":"bash-1","jobId":"bash-2"}`), `Error: "job_id" ("bash-1") and "jobId" ("bash-2") name different jobs: give one of them`, true)
		expect(t, h.call(t, s, tool, `{"jobId":"bash-9"}`), `Error: unknown job bash-9`, true)
	}
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-1","wait":"yes"}`), `Error: "wait" must be a boolean`, true)
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-1","timeout_ms":"5"}`), `Error: "timeout_ms" must be a number`, true)
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-1","wait":true,"timeout_ms":0}`), `Error: invalid timeout_ms: expected a positive number, got 0`, true)
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-1","wait":true,"timeout_ms":-2.5}`), `Error: invalid timeout_ms: expected a positive number, got -2.5`, true)
	expect(t, h.call(t, s, "job_kill", `{"job_id":"bash-1","reason":3}`), `Error: "reason" must be a string`, true)
}

func TestJobOutputWaitTimesOut(t *testing.T) {
	h := compose(t, map[string]any{"waitTimeoutMs": 30000})
	s, _ := session("s1")
	w := newWork()
	if _, err := h.jobs.Start(jobs.Spec{Kind: "bash", Label: "sleep", Owner: s, Run: w.run}); err != nil {
		t.Fatal(err)
	}
	w.write("partial")
	begin := time.Now()
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-1","wait":true,"timeout_ms":30}`), "partial\n[status: running]", false)
	if time.Since(begin) < 30*time.Millisecond {
		t.Fatal("wait returned before timeout_ms")
	}
	// An aborted wait consumes nothing.
	ctx, cancel := context.WithCancel(context.Background())
	w.write("kept")
	go func() {
		waitFor(t, 10*time.Second, "the read to wait", func() bool { return jobs.ReadersOf(h.jobs, "bash-1") == 1 })
		cancel()
	}()
	res := h.tools.Call(ctx, "job_output", json.RawMessage(`{"job_id":"bash-1","wait":true}`), s)
	expect(t, res, "Error: tool call aborted", true)
	expect(t, h.call(t, s, "job_output", `{"job_id":"bash-1"}`), "kept\n[status: running]", false)
}

func TestJobsPluginLifecycle(t *testing.T) {
	h := compose(t, nil)
	for _, name := range []string{"job_kill", "job_list", "job_output", "job_write"} {
		tool, ok := h.tools.Tool(name)
		if !ok {
			t.Fatalf("tool %s missing", name)
		}
		if _, err := json.Marshal(tool.InputSchema); err != nil {
			t.Fatal(err)
		}
	}
	var registered []string
	for _, tool := range h.tools.Tools() {
		registered = append(registered, tool.Name)
	}
	if declared := slices.Sorted(slices.Values(jobs.Plugin.Tools)); !slices.Equal(declared, registered) {
		t.Errorf("the plugin declares the tools %q, and registers %q", declared, registered)
	}
	schema, _ := json.Marshal(mustTool(t, h.tools, "job_output").InputSchema)
	// Both spellings are declared (job_id first, saying jobId is accepted), and job_id is
	// required, as the contract says (a call that gives only jobId is served: below).
	if !strings.HasPrefix(string(schema), `{"type":"object","properties":{"job_id":{"type":"string","description":"Required: `) ||
		!strings.Contains(string(schema), `(jobId is accepted as the same argument)."},"jobId":{"type":"string","description":"Accepted spelling of job_id`) ||
		!strings.HasSuffix(string(schema), `"required":["job_id"]}`) {
		t.Fatalf("job_output schema = %s", schema)
	}
	secs := h.prompts.Sections()
	if len(secs) != 1 || secs[0].Name != "tool:jobs" || secs[0].Order != 106 || secs[0].Text != jobs.PromptText {
		t.Fatalf("sections = %+v", secs)
	}
	for _, phrase := range []string{"job id", "notified", "busy-poll", "sleep", "job_output", "job_kill"} {
		if !strings.Contains(jobs.PromptText, phrase) {
			t.Errorf("tool:jobs prompt lacks %q", phrase)
		}
	}

	// Ending a session disposes its jobs through the container's session hooks.
	s, _ := session("s1")
	w := newWork()
	if _, err := h.jobs.Start(jobs.Spec{Kind: "bash", Label: "x", Owner: s, Run: w.run}); err != nil {
		t.Fatal(err)
	}
	h.rt.EndSession("s1")
	if w.cancels.Load() != 1 {
		t.Fatal("EndSession did not cancel the session's job")
	}
	expect(t, h.call(t, s, "job_list", `{}`), "(no background jobs)", false)

	// Unloading the jobs row removes its tools and section and disposes its jobs.
	s2, _ := session("s2")
	w2 := newWork()
	if _, err := h.jobs.Start(jobs.Spec{Kind: "bash", Label: "y", Owner: s2, Run: w2.run}); err != nil {
		t.Fatal(err)
	}
	if err := h.rt.Unmount("jobs"); err != nil {
		t.Fatal(err)
	}
	if w2.cancels.Load() != 1 {
		t.Fatal("unloading jobs did not cancel its jobs")
	}
	if len(h.tools.Tools()) != 0 || len(h.prompts.Sections()) != 0 {
		t.Fatalf("left behind: tools %d, sections %d", len(h.tools.Tools()), len(h.prompts.Sections()))
	}
	if _, ok := container.Lookup(h.rt, jobs.Service); ok {
		t.Fatal("jobs service survived unmount")
	}
}

func TestJobsConfig(t *testing.T) {
	cat, _ := container.NewCatalog(tools.Plugin, prompt.Plugin, jobs.Plugin)
	rt := container.NewRuntime(cat, container.Options{Logger: quietLogger()})
	defer rt.Close()
	for cfg, want := range map[string]string{
		"maxConcurrentJobsPerOwner": "jobs: maxConcurrentJobsPerOwner must be a positive integer",
		"waitTimeoutMs":             "jobs: waitTimeoutMs must be a positive integer",
		"maxWaitTimeoutMs":          "jobs: maxWaitTimeoutMs must be a positive integer",
	} {
		err := rt.Validate([]container.Row{{ID: "jobs", Plugin: "jobs", Config: map[string]any{cfg: 0}}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: 0 → %v", cfg, err)
		}
	}
	err := rt.Validate([]container.Row{{ID: "jobs", Plugin: "jobs", Config: map[string]any{"waitTimeoutMs": 700000}}})
	if err == nil || !strings.Contains(err.Error(), "jobs: waitTimeoutMs must be no greater than maxWaitTimeoutMs") {
		t.Fatalf("wait > max: %v", err)
	}
}

func TestLimitThroughConfig(t *testing.T) {
	h := compose(t, map[string]any{"maxConcurrentJobsPerOwner": 2})
	s, _ := session("s1")
	for range 2 {
		if _, err := h.jobs.Start(jobs.Spec{Kind: "bash", Label: "x", Owner: s, Run: newWork().run}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := h.jobs.Start(jobs.Spec{Kind: "bash", Label: "x", Owner: s, Run: newWork().run})
	if err == nil || err.Error() != "background job limit reached for this owner (limit: 2); use job_kill to stop an unneeded job, wait for it to finish, then retry" {
		t.Fatalf("third start: %v", err)
	}
}

func mustTool(t *testing.T, r *tools.Registry, name string) tools.Tool {
	tool, ok := r.Tool(name)
	if !ok {
		t.Fatalf("tool %s missing", name)
	}
	return tool
}

// A 100 KB command is one line of 200 characters in job_list, text and value alike, and
// in the completion notice.
func TestJobListCapsLabels(t *testing.T) {
	h := compose(t, nil)
	s, _ := session("s1")
	label := strings.Repeat("é", 150) + "\n" + strings.Repeat("x", 100_000)
	w := newWork()
	if _, err := h.jobs.Start(jobs.Spec{Kind: "bash", Label: label, Owner: s, Run: w.run}); err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("é", 150) + " " + strings.Repeat("x", 49) + "…"
	res := h.call(t, s, "job_list", `{}`)
	expect(t, res, "bash-1 [bash] running — "+want, false)
	if v := res.Value.(jobs.ListValue); len(v.Jobs) != 1 || v.Jobs[0].Label != want {
		t.Errorf("value = %+v", v)
	}
}
