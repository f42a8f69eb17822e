package jobs_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/jobs"
)

var (
	statusLine = regexp.MustCompile(`\[status: (running|stopping|completed|killed|failed)(, [^\]]+)?\]$`)
	listLine   = regexp.MustCompile(`^[a-z]+-\d+ \[[a-z]+\] (running|stopping|completed|killed|failed) — .+$`)
	killText   = regexp.MustCompile(`^(requested cancellation of job [a-z]+-\d+|job [a-z]+-\d+ had already finished \[status: [a-z]+(, [^\]]+)?\])$`)
)

// FuzzJobArgs drives arbitrary argument bytes into job_output, job_list and job_kill
// (the first byte picks the tool): never a panic, and every input is either a result in
// the tool's exact shape or an `Error:` result.
func FuzzJobArgs(f *testing.F) {
	for _, seed := range []struct {
		tool byte
		args string
	}{
		{0, `{"job_id":"bash-1"}`}, {0, `{"job_id":"bash-2","wait":true,"timeout_ms":5}`}, {0, `{"job_id":""}`},
		{0, `{"job_id":"bash-1","timeout_ms":-1}`}, {1, `{}`}, {1, `{"extra":1}`}, {2, `{"job_id":"bash-3","reason":"x"}`},
		{2, `{"job_id":"nope"}`}, {0, `null`}, {2, `[1]`}, {0, `{"job_id":"bash-4","wait":"true"}`},
	} {
		f.Add(seed.tool, []byte(seed.args))
	}
	h := compose(f, map[string]any{"waitTimeoutMs": 1, "maxWaitTimeoutMs": 2})
	owner, _ := session("owner")
	for i := range 5 {
		w := newWork()
		if _, err := h.jobs.Start(jobs.Spec{Kind: "bash", Label: "job", Owner: owner, Run: w.run}); err != nil {
			f.Fatal(err)
		}
		w.write("line\n")
		if i%2 == 0 {
			w.finish(jobs.Outcome{Status: jobs.StatusCompleted, Detail: "exit code: 0"})
		}
	}
	sessions := []*container.Session{owner, nil, {ID: "stranger"}}
	names := []string{"job_output", "job_list", "job_kill"}
	f.Fuzz(func(t *testing.T, tool byte, data []byte) {
		name := names[int(tool)%len(names)]
		s := sessions[int(tool/3)%len(sessions)]
		res := h.tools.Call(context.Background(), name, json.RawMessage(data), s)
		if strings.Contains(res.Text, "panicked") {
			t.Fatalf("%s %q panicked: %s", name, data, res.Text)
		}
		if res.IsError {
			if !strings.HasPrefix(res.Text, "Error: ") {
				t.Fatalf("%s %q: error without prefix: %q", name, data, res.Text)
			}
			return
		}
		// Unknown keys are named on a first line of their own.
		if first, rest, ok := strings.Cut(res.Text, "\n"); ok && strings.HasPrefix(first, "[ignored unknown argument") {
			res.Text = rest
		}
		switch name {
		case "job_output":
			if !statusLine.MatchString(res.Text) {
				t.Fatalf("job_output %q = %q", data, res.Text)
			}
		case "job_list":
			if res.Text == "(no background jobs)" {
				break
			}
			for _, line := range strings.Split(res.Text, "\n") {
				if !listLine.MatchString(line) {
					t.Fatalf("job_list line %q", line)
				}
			}
		case "job_kill":
			if !killText.MatchString(res.Text) {
				t.Fatalf("job_kill %q = %q", data, res.Text)
			}
		}
		if _, err := json.Marshal(res.Value); err != nil {
			t.Fatalf("value does not marshal: %v", err)
		}
	})
}
