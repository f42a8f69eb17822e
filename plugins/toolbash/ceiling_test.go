package toolbash_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/approval"
	"github.com/dsh-dev/dsh/plugins/roles"
	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/shell"
)

// rolesRow gives reader the ceiling read-only and builder workspace-write; admin has none.
var rolesRow = container.Row{ID: "roles", Plugin: "roles", Config: map[string]any{"roles": map[string]any{
	"reader":  map[string]any{"maxMode": "read-only"},
	"builder": map[string]any{"maxMode": "workspace-write"},
	"admin":   map[string]any{},
}}}

func ceilingHarness(t *testing.T, mode string, a *fakeApprover) *harness {
	t.Helper()
	return newHarness(t, setup{mode: mode, approver: a, extraPlugin: []container.Plugin{roles.Plugin}, extraRows: []container.Row{rolesRow}})
}

func roleSession(id, role string) *container.Session {
	return &container.Session{ID: id, Cwd: "/ws", Role: role}
}

// A session's bash schema offers only the escalations within its role's ceiling, and
// its description says what it may do; a session without one sees the tool as registered.
func TestCeilingShapesTheSchema(t *testing.T) {
	h := ceilingHarness(t, "workspace-write", &fakeApprover{outcome: approval.AllowedOnce})
	bash := func(s *container.Session) tools.Tool {
		for _, tl := range h.tools.ToolsFor(s) {
			if tl.Name == "bash" {
				return tl
			}
		}
		t.Fatal("no bash tool")
		return tools.Tool{}
	}
	registered, _ := h.tools.Tool("bash")
	enum := func(tl tools.Tool) []string {
		p, ok := tl.InputSchema.Properties.Lookup("sandbox_permissions")
		if !ok {
			return nil
		}
		_, hasJust := tl.InputSchema.Properties.Lookup("justification")
		if !hasJust {
			t.Fatal("sandbox_permissions without justification")
		}
		return p.Enum
	}
	if got := enum(bash(roleSession("a", "admin"))); !slices.Equal(got, []string{"workspace-write", "danger-full-access"}) || bash(roleSession("a", "admin")).InputSchema != registered.InputSchema {
		t.Fatalf("admin is offered %q", got)
	}
	if got := enum(bash(roleSession("b", "builder"))); !slices.Equal(got, []string{"workspace-write"}) {
		t.Fatalf("builder is offered %q", got)
	}
	reader := bash(roleSession("r", "reader"))
	if got := enum(reader); got != nil {
		t.Fatalf("reader is offered %q", got)
	}
	if !strings.Contains(reader.Description, "- Commands run in a file sandbox (mode: read-only), which this session cannot widen.") ||
		strings.Contains(reader.Description, "sandbox_permissions") {
		t.Fatalf("reader's description:\n%s", reader.Description)
	}
	if b := bash(roleSession("b", "builder")); !strings.Contains(b.Description, "(default mode: workspace-write)") || !strings.Contains(b.Description, "that suffices (workspace-write) and") {
		t.Fatalf("builder's description:\n%s", b.Description)
	}
	// Same values on every listing (a server compares them).
	if bash(roleSession("r2", "reader")).InputSchema != reader.InputSchema {
		t.Fatal("the reader's schema is rebuilt per listing")
	}
	// The composition's description is unchanged for a session without a ceiling.
	if bash(nil).Description != toolbash.Description(true, "workspace-write", false, false) {
		t.Fatal("the description without a ceiling changed")
	}
}

// An escalation past the ceiling is refused without asking; the default mode and a
// session's override are narrowed to the ceiling; no escalation hint is offered past it.
func TestCeilingRefusesWithoutAsking(t *testing.T) {
	a := &fakeApprover{outcome: approval.AllowedOnce}
	h := ceilingHarness(t, "workspace-write", a)
	reader := roleSession("r", "reader")
	expect(t, h.call(t, reader, escalateArgs("danger-full-access")), `Error: sandbox escalation to "danger-full-access" exceeds the "reader" role's ceiling "read-only"`, true)
	expect(t, h.call(t, roleSession("b", "builder"), escalateArgs("danger-full-access")), `Error: sandbox escalation to "danger-full-access" exceeds the "builder" role's ceiling "workspace-write"`, true)
	if len(a.requests) != 0 || h.exec.requestCount() != 0 {
		t.Fatalf("asked %d times, ran %d commands", len(a.requests), h.exec.requestCount())
	}

	h.exec.behave = func(spec shell.ExecSpec) (shell.RunResult, error) {
		return shell.RunResult{ExitCode: intp(1), Sandbox: &shell.SandboxFacts{Mode: spec.Sandbox.Mode, Denied: true, Enforcement: "full"}}, nil
	}
	override := &container.Session{ID: "o", Cwd: "/ws", Role: "reader", SandboxMode: "danger-full-access"}
	for _, s := range []*container.Session{reader, override} {
		res := h.call(t, s, `{"command":"touch x","description":"Touch"}`)
		if req := h.exec.lastRequest(t); req.Sandbox == nil || req.Sandbox.Mode != "read-only" || req.Sandbox.WorkspaceRoot != "/canonical/ws" {
			t.Fatalf("%s ran with %+v", s.ID, req.Sandbox)
		}
		if strings.Contains(res.Text, toolbash.EscalationHint) {
			t.Fatalf("the hint is offered past the ceiling: %q", res.Text)
		}
	}
	// At its ceiling, builder gets no hint either.
	res := h.call(t, roleSession("b2", "builder"), `{"command":"touch x","description":"Touch"}`)
	if strings.Contains(res.Text, toolbash.EscalationHint) || h.exec.lastRequest(t).Sandbox.Mode != "workspace-write" {
		t.Fatalf("builder: %q", res.Text)
	}
	// Below its ceiling it does, and escalation within the ceiling is asked as before.
	h2 := ceilingHarness(t, "read-only", a)
	h2.exec.behave = h.exec.behave
	if res := h2.call(t, roleSession("b", "builder"), `{"command":"touch x","description":"Touch"}`); !strings.Contains(res.Text, toolbash.EscalationHint) {
		t.Fatalf("builder below its ceiling: %q", res.Text)
	}
	h2.exec.behave = func(shell.ExecSpec) (shell.RunResult, error) { return shell.RunResult{ExitCode: intp(0)}, nil }
	expect(t, h2.call(t, roleSession("b", "builder"), escalateArgs("workspace-write")), "(no output)", false)
	if len(a.requests) != 1 || h2.exec.lastRequest(t).Sandbox.Mode != "workspace-write" {
		t.Fatalf("escalation within the ceiling: %d requests", len(a.requests))
	}
}

// A ceiling below danger-full-access needs a confining executor: the roles row fails
// when it finds one that is not; a call of a role with a ceiling is refused if one is swapped in
// (or came up after the roles row).
func TestCeilingNeedsAConfiningExecutor(t *testing.T) {
	h := ceilingHarness(t, "", nil)
	var st container.RowStatus
	for _, r := range h.rt.Status().Rows {
		if r.ID == "roles" {
			st = r
		}
	}
	want := `roles: role "builder" has maxMode "workspace-write", but the composition's executor does not confine commands`
	if st.State != container.StateFailed || !strings.HasPrefix(st.Error, want) {
		t.Fatalf("roles row: %s %q", st.State, st.Error)
	}

	h = newHarness(t, setup{noShellRow: true, extraPlugin: []container.Plugin{roles.Plugin},
		extraRows: []container.Row{rolesRow, {ID: "bash", Plugin: "fake-shell"}}})
	expect(t, h.call(t, roleSession("r", "reader"), `{"command":"ls","description":"List"}`),
		`Error: the "reader" role's sandbox ceiling "read-only" cannot be kept: this composition's executor does not confine commands`, true)
	if h.exec.requestCount() != 0 {
		t.Fatal("the command ran")
	}
	h.exec.behave = func(shell.ExecSpec) (shell.RunResult, error) { return shell.RunResult{ExitCode: intp(0)}, nil }
	expect(t, h.call(t, roleSession("a", "admin"), `{"command":"ls","description":"List"}`), "(no output)", false)
}
