package jobs_test

import (
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dsh-dev/dsh/plugins/jobs"
)

// A read that lost output carries it as typed fields of job_output's structured
// content — lossy, and the spill files the notice names — beside the unchanged text;
// a read that lost nothing has none of them. Both match the tool's outputSchema.
func TestJobOutputReportsALossyRead(t *testing.T) {
	h := compose(t, nil)
	s, _ := session("s1")
	reads := []struct {
		text string
		loss jobs.Loss
	}{
		{"tail\n[some output was dropped from memory; full output: /spill/1-stdout.log, /spill/1-stderr.log]", jobs.Loss{Lossy: true, StdoutSpill: "/spill/1-stdout.log", StderrSpill: "/spill/1-stderr.log"}},
		{"more\n[some output was dropped from memory; full output: (unavailable)]", jobs.Loss{Lossy: true}},
		{"plain", jobs.Loss{}},
	}
	w := newWork()
	run := func() (jobs.Hooks, error) {
		hooks := w.hooks()
		next := 0
		hooks.ReadWithLoss = func() (string, jobs.Loss) {
			r := reads[next]
			next++
			return r.text, r.loss
		}
		return hooks, nil
	}
	if _, err := h.jobs.Start(jobs.Spec{Kind: "bash", Label: "seq 1 100000", Owner: s, Run: run}); err != nil {
		t.Fatal(err)
	}
	schema := outputSchema(t, h, "job_output")
	for _, want := range []struct{ text, value string }{
		{reads[0].text + "\n[status: running]", `{"jobId":"bash-1","kind":"bash","label":"seq 1 100000","status":"running","output":` + quote(reads[0].text) + `,"lossy":true,"stdoutSpill":"/spill/1-stdout.log","stderrSpill":"/spill/1-stderr.log"}`},
		{reads[1].text + "\n[status: running]", `{"jobId":"bash-1","kind":"bash","label":"seq 1 100000","status":"running","output":` + quote(reads[1].text) + `,"lossy":true}`},
		{"plain\n[status: running]", `{"jobId":"bash-1","kind":"bash","label":"seq 1 100000","status":"running","output":"plain"}`},
	} {
		res := h.call(t, s, "job_output", `{"job_id":"bash-1"}`)
		expect(t, res, want.text, false)
		raw, _ := json.Marshal(res.Value)
		if string(raw) != want.value {
			t.Errorf("structured content %s\nwant %s", raw, want.value)
		}
		var instance any
		json.Unmarshal(raw, &instance)
		if err := schema.Validate(instance); err != nil {
			t.Errorf("%s does not match the outputSchema: %v", raw, err)
		}
	}
	for _, field := range []string{"lossy", "stdoutSpill", "stderrSpill"} {
		if _, ok := schema.Schema().Properties[field]; !ok {
			t.Errorf("the outputSchema has no %q", field)
		}
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// outputSchema is the named tool's outputSchema, resolved as a client sees it (JSON).
func outputSchema(t *testing.T, h *harness, name string) *jsonschema.Resolved {
	t.Helper()
	tool, ok := h.tools.Tool(name)
	if !ok || tool.OutputSchema == nil {
		t.Fatalf("%s: no outputSchema", name)
	}
	data, _ := json.Marshal(tool.OutputSchema)
	var s jsonschema.Schema
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
