package toolbash_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/approval"
	"github.com/dsh-dev/dsh/shell"
)

func escalateArgs(mode string) string {
	return `{"command":"touch /etc/x","description":"Touch a file","sandbox_permissions":"` + mode + `","justification":"needs to write the config"}`
}

func TestEscalationOutcomes(t *testing.T) {
	s, _ := newSession("s", "/ws")
	cases := []struct {
		outcome approval.Outcome
		want    string
	}{
		{approval.Rejected, `Error: the user rejected escalating this command to "danger-full-access"`},
		{approval.Cancelled, `Error: approval for escalating to "danger-full-access" was cancelled`},
		{approval.Unavailable, `Error: sandbox escalation to "danger-full-access" requires approval, but no approval channel is available`},
		{"maybe", `Error: approval for escalating to "danger-full-access" returned an unknown outcome "maybe"; the command did not run`},
	}
	for _, tc := range cases {
		a := &fakeApprover{outcome: tc.outcome}
		h := newHarness(t, setup{mode: "workspace-write", approver: a})
		expect(t, h.call(t, s, escalateArgs("danger-full-access")), tc.want, true)
		if h.exec.requestCount() != 0 {
			t.Fatalf("%s: the command ran", tc.outcome)
		}
		if len(a.requests) != 1 {
			t.Fatalf("%s: %d approval requests", tc.outcome, len(a.requests))
		}
		req := a.requests[0]
		if req.Session != s || req.Tool != "bash" || req.Reason != "escalate sandbox to danger-full-access: needs to write the config" ||
			req.Command != "touch /etc/x" || req.Mode != "danger-full-access" || req.Justification != "needs to write the config" {
			t.Fatalf("approval request = %+v", req)
		}
	}
}

func TestEscalationAllowedOnce(t *testing.T) {
	a := &fakeApprover{outcome: approval.AllowedOnce}
	h := newHarness(t, setup{mode: "read-only", approver: a})
	h.exec.behave = func(spec shell.ExecSpec) (shell.RunResult, error) {
		return shell.RunResult{ExitCode: intp(0), Sandbox: &shell.SandboxFacts{Mode: spec.Sandbox.Mode, Enforcement: "full"}}, nil
	}
	s, _ := newSession("s", "/ws")
	expect(t, h.call(t, s, escalateArgs("workspace-write")), "(no output)", false)
	req := h.exec.lastRequest(t)
	if req.Sandbox == nil || req.Sandbox.Mode != "workspace-write" || req.Sandbox.WorkspaceRoot != "/canonical/ws" {
		t.Fatalf("escalated request = %+v", req.Sandbox)
	}
	// Only that call: the next one runs in the default mode again.
	h.call(t, s, `{"command":"ls","description":"List"}`)
	if req := h.exec.lastRequest(t); req.Sandbox.Mode != "read-only" {
		t.Fatalf("mode after the escalated call = %q", req.Sandbox.Mode)
	}
}

func TestEscalationNotStrictlyWider(t *testing.T) {
	a := &fakeApprover{outcome: approval.AllowedOnce}
	h := newHarness(t, setup{mode: "workspace-write", approver: a})
	s, _ := newSession("s", "/ws")
	expect(t, h.call(t, s, escalateArgs("workspace-write")), `Error: sandbox escalation to "workspace-write" is not strictly wider than this call's current "workspace-write" mode`, true)
	// The effective mode is per session: a session override counts.
	full := &container.Session{ID: "f", Cwd: "/ws", SandboxMode: "danger-full-access"}
	expect(t, h.call(t, full, escalateArgs("danger-full-access")), `Error: sandbox escalation to "danger-full-access" is not strictly wider than this call's current "danger-full-access" mode`, true)
	if len(a.requests) != 0 || h.exec.requestCount() != 0 {
		t.Fatal("a non-widening escalation prompted or ran")
	}
	// A read-only session override makes workspace-write a widening.
	ro := &container.Session{ID: "r", Cwd: "/ws", SandboxMode: "read-only"}
	h.exec.behave = func(shell.ExecSpec) (shell.RunResult, error) { return shell.RunResult{ExitCode: intp(0)}, nil }
	expect(t, h.call(t, ro, escalateArgs("workspace-write")), "(no output)", false)
}

func TestEscalationWithoutApprovalService(t *testing.T) {
	h := newHarness(t, setup{mode: "read-only"})
	expect(t, h.call(t, nil, escalateArgs("danger-full-access")), `Error: sandbox escalation to "danger-full-access" requires approval, but no approval service is composed`, true)
	if h.exec.requestCount() != 0 {
		t.Fatal("ran without approval")
	}
}

func TestDenialRenderedWithHint(t *testing.T) {
	h := newHarness(t, setup{mode: "read-only"})
	h.exec.behave = func(spec shell.ExecSpec) (shell.RunResult, error) {
		return shell.RunResult{ExitCode: intp(1), Stderr: out("touch: cannot touch 'x': Read-only file system\n"),
			Sandbox: &shell.SandboxFacts{Mode: spec.Sandbox.Mode, Denied: true, Enforcement: "full"}}, nil
	}
	expect(t, h.call(t, nil, `{"command":"touch x","description":"Touch a file"}`),
		"[stderr]\ntouch: cannot touch 'x': Read-only file system\n[sandbox: file access denied under read-only mode]\n"+
			"[sandbox: escalation available — retry this exact command once with sandbox_permissions (the narrowest wider mode that suffices) + justification; the approval prompt asks the user]\n[exit code: 1]", false)
	// No wider mode exists under danger-full-access: no hint.
	s := &container.Session{ID: "x", SandboxMode: "danger-full-access"}
	expect(t, h.call(t, s, `{"command":"touch x","description":"Touch a file"}`),
		"[stderr]\ntouch: cannot touch 'x': Read-only file system\n[sandbox: file access denied under danger-full-access mode]\n[exit code: 1]", false)
}

// prompter answers every question with answer and records the messages.
type prompter struct {
	answer   container.Answer
	messages []string
}

func (p *prompter) Confirm(_ context.Context, message string) (container.Answer, error) {
	p.messages = append(p.messages, message)
	return p.answer, nil
}

// The escalation path through the real approval plugin (the approval.Approver seam).
func TestEscalationThroughApprovalPlugin(t *testing.T) {
	cases := []struct {
		policy string
		answer container.Answer
		noChan bool
		want   string
	}{
		{policy: "allow", want: "(no output)"},
		{policy: "deny", want: `Error: the user rejected escalating this command to "workspace-write"`},
		{policy: "ask", answer: container.Accepted, want: "(no output)"},
		{policy: "ask", answer: container.Declined, want: `Error: the user rejected escalating this command to "workspace-write"`},
		{policy: "ask", answer: container.Cancelled, want: `Error: approval for escalating to "workspace-write" was cancelled`},
		{policy: "ask", noChan: true, want: `Error: sandbox escalation to "workspace-write" requires approval, but no approval channel is available`},
	}
	for _, tc := range cases {
		h := newHarness(t, setup{mode: "read-only", extraPlugin: []container.Plugin{approval.Plugin}})
		if err := h.rt.Mount(container.Row{ID: "approval", Plugin: "approval", Config: map[string]any{"policy": tc.policy}}); err != nil {
			t.Fatal(err)
		}
		h.exec.behave = func(spec shell.ExecSpec) (shell.RunResult, error) {
			return shell.RunResult{ExitCode: intp(0), Sandbox: &shell.SandboxFacts{Mode: spec.Sandbox.Mode}}, nil
		}
		p := &prompter{answer: tc.answer}
		s := &container.Session{ID: "s", Cwd: "/ws", Prompter: p}
		if tc.noChan {
			s.Prompter = nil
		}
		res := h.call(t, s, escalateArgs("workspace-write"))
		expect(t, res, tc.want, res.IsError)
		if res.IsError != strings.HasPrefix(tc.want, "Error: ") {
			t.Fatalf("%s/%s: isError = %v", tc.policy, tc.answer, res.IsError)
		}
		if ran := h.exec.requestCount() == 1; ran != !res.IsError {
			t.Fatalf("%s/%s: ran = %v", tc.policy, tc.answer, ran)
		}
		if ran := h.exec.requestCount(); ran == 1 && h.exec.lastRequest(t).Sandbox.Mode != "workspace-write" {
			t.Fatalf("escalated mode = %q", h.exec.lastRequest(t).Sandbox.Mode)
		}
		if tc.policy == "ask" && !tc.noChan && (len(p.messages) != 1 || !strings.Contains(p.messages[0], "touch /etc/x") || !strings.Contains(p.messages[0], "workspace-write")) {
			t.Fatalf("prompt = %q", p.messages)
		}
	}
}
