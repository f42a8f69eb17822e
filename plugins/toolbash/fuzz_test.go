package toolbash_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/approval"
	"github.com/dsh-dev/dsh/shell"
)

// FuzzBashArgs drives arbitrary argument bytes through the registry into the bash tool
// (confining fake executor, approval allowing once): no input may panic, and every
// input either becomes one valid executor request or an `Error:` result that ran
// nothing.
func FuzzBashArgs(f *testing.F) {
	for _, seed := range []string{
		`{"command":"echo hello","description":"Say hello"}`,
		`{"command":"sleep 60","description":"Wait","timeoutMs":100}`,
		`{"command":"ls","description":"List","workdir":"sub","run_in_background":true}`,
		`{"command":"touch x","description":"Touch","sandbox_permissions":"danger-full-access","justification":"needs it"}`,
		`{"command":"x","description":"y","justification":"   "}`,
		`{"command":"x","description":"y","env":{"A":"1"},"stdin":"data","timeoutMs":-1}`,
		`{"command":"","description":""}`,
		`{"command":"x","description":"y","timeoutMs":1e308}`,
		`[]`, `null`, `{}`, `{"command":`, `"str"`, `{"command":"a","description":"b"} trailing`,
	} {
		f.Add([]byte(seed))
	}
	a := &fakeApprover{outcome: approval.AllowedOnce}
	h := newHarness(f, setup{mode: "read-only", approver: a})
	h.exec.behave = func(spec shell.ExecSpec) (shell.RunResult, error) {
		return shell.RunResult{ExitCode: intp(len(spec.Command) % 3), Stdout: out(spec.Command), TimeoutMs: spec.TimeoutMs}, nil
	}
	n := 0
	f.Fuzz(func(t *testing.T, data []byte) {
		n++
		s := &container.Session{ID: fmt.Sprintf("fuzz-%d", n), Cwd: "/fuzz"}
		h.exec.reset()
		before := h.exec.requestCount()
		res := h.tools.Call(context.Background(), "bash", json.RawMessage(data), s)
		ran := h.exec.requestCount() - before
		if strings.Contains(res.Text, "panicked") {
			t.Fatalf("panic for %q: %s", data, res.Text)
		}
		if res.IsError {
			if !strings.HasPrefix(res.Text, "Error: ") {
				t.Fatalf("error result without the Error: prefix for %q: %q", data, res.Text)
			}
			if ran != 0 {
				t.Fatalf("an error result still reached the executor for %q: %q", data, res.Text)
			}
			return
		}
		if ran != 1 {
			t.Fatalf("%d requests for one successful call %q", ran, data)
		}
		req := h.exec.lastRequest(t)
		if strings.TrimSpace(req.Command) == "" || req.Env != nil || req.Stdin != nil || req.StdoutMaxBytes != nil ||
			req.DshEnv["DSH_SHELL"] != "1" || req.DshEnv["DSH_SESSION_ID"] != s.ID || req.Sandbox == nil {
			t.Fatalf("invalid request for %q: %+v", data, req)
		}
		if req.TimeoutMs != nil && !(*req.TimeoutMs > 0) {
			t.Fatalf("non-positive timeout reached the request for %q", data)
		}
		if req.Expiry == shell.ExpiryNone {
			if !strings.HasPrefix(res.Text, "started background job bash-") {
				t.Fatalf("background reply = %q", res.Text)
			}
			h.rt.EndSession(s.ID)
			return
		}
		if res.Value == nil || res.Text == "" {
			t.Fatalf("empty foreground result for %q", data)
		}
		if _, err := json.Marshal(res.Value); err != nil {
			t.Fatalf("value does not marshal: %v", err)
		}
	})
}
