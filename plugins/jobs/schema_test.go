package jobs_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dsh-dev/dsh/plugins/jobs"
)

// TestResultsMatchTheirOutputSchemas: the structured content of job_output, job_list
// and job_kill — running, stopping and finished jobs, with and without detail and kill
// reason — validates against each tool's outputSchema as a client sees it (JSON).
func TestResultsMatchTheirOutputSchemas(t *testing.T) {
	h := compose(t, nil)
	schemas := map[string]*jsonschema.Resolved{}
	for _, tool := range h.tools.Tools() {
		if tool.OutputSchema == nil {
			t.Fatalf("%s declares no outputSchema", tool.Name)
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
		schemas[tool.Name] = r
	}
	s, _ := session("s1")
	check := func(name, args string) {
		t.Helper()
		res := h.call(t, s, name, args)
		if res.IsError || res.Value == nil {
			t.Fatalf("%s %s: %+v", name, args, res)
		}
		raw, _ := json.Marshal(res.Value)
		var instance any
		json.Unmarshal(raw, &instance)
		if err := schemas[name].Validate(instance); err != nil {
			t.Errorf("%s %s: %s does not match its outputSchema: %v", name, args, raw, err)
		}
	}
	check("job_list", `{}`)
	w1, _ := start(t, h.jobs, "bash", "sleep 60", s)
	w1.write("partial")
	w2, _ := start(t, h.jobs, "bash", "echo done", s)
	w2.write("done\n")
	w2.finish(jobs.Outcome{Status: jobs.StatusCompleted, Detail: "exit code: 0"})
	waitFor(t, 10*time.Second, "bash-2 to finish", func() bool {
		snap, _ := h.jobs.Get(s, "bash-2")
		return snap.Status.Terminal()
	})
	check("job_output", `{"job_id":"bash-1"}`)
	check("job_output", `{"job_id":"bash-2"}`)
	check("job_list", `{}`)
	check("job_kill", `{"job_id":"bash-1","reason":"no longer needed"}`)
	check("job_list", `{}`)
	check("job_kill", `{"job_id":"bash-2"}`)
}
