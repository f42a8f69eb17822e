package bashsandbox_test

// Item 7 of issue 5: escalation through the bash tool with the real bash-sandbox and
// the real approval service.

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/shell"
)

const justification = "the build writes its output into the workspace"

func escalate(mode string) []any {
	return []any{"sandbox_permissions", mode, "justification", justification}
}

func propertyNames(s *tools.Schema) []string {
	var out []string
	for _, p := range s.Properties {
		out = append(out, p.Name)
	}
	return out
}

// The escalation fields exist only while the executor confines.
func TestEscalationFieldsOnlyUnderBashSandbox(t *testing.T) {
	sandboxed := newStack(t, stackSetup{approval: "allow"})
	tool, _ := sandboxed.tools.Tool("bash")
	if got := strings.Join(propertyNames(tool.InputSchema), ","); got != "command,description,timeoutMs,workdir,run_in_background,tty,sandbox_permissions,justification" {
		t.Fatalf("bash-sandbox: properties %s", got)
	}
	if !strings.Contains(tool.Description, "[sandbox: file access denied under <mode> mode]") || !strings.Contains(tool.Description, "default mode: read-only") {
		t.Fatalf("bash-sandbox: the description does not teach the sandbox:\n%s", tool.Description)
	}

	local := newStack(t, stackSetup{executor: "bash-local", approval: "allow"})
	tool, _ = local.tools.Tool("bash")
	if got := strings.Join(propertyNames(tool.InputSchema), ","); got != "command,description,timeoutMs,workdir,run_in_background,tty" {
		t.Fatalf("bash-local: properties %s", got)
	}
	if strings.Contains(tool.Description, "sandbox") {
		t.Fatalf("bash-local: the description mentions the sandbox:\n%s", tool.Description)
	}
	ws := workspace(t)
	marker := filepath.Join(ws, "marker")
	expect(t, local.bash(t, session("local", ws), "touch "+marker, escalate("workspace-write")...),
		"Error: sandbox_permissions is not available in this composition (no sandboxing executor to escalate)", true)
	if exists(marker) {
		t.Fatal("a refused escalation ran")
	}
}

// A denial is followed by the hint; the retry with an approved escalation runs once in
// the wider mode; the next call is back in the effective mode.
func TestEscalationAllowedOnce(t *testing.T) {
	st := newStack(t, stackSetup{approval: "allow"})
	ws := workspace(t)
	s := session("once", ws)
	first, second := filepath.Join(ws, "first"), filepath.Join(ws, "second")

	res := st.bash(t, s, "touch "+first)
	expect(t, res, deniedText("touch: cannot touch '"+first+"': Permission denied", "read-only"), false)

	res = st.bash(t, s, "touch "+first, escalate("workspace-write")...)
	expect(t, res, "(no output)", false)
	if got, want := sandboxOf(t, res), sandboxJSON("workspace-write", false, enforcement(bashsandbox.NetworkDeny), false); got != want {
		t.Fatalf("escalated call: sandbox value %s, want %s", got, want)
	}
	if !exists(first) {
		t.Fatal("the approved escalation did not run in workspace-write")
	}

	res = st.bash(t, s, "touch "+second)
	expect(t, res, deniedText("touch: cannot touch '"+second+"': Permission denied", "read-only"), false)
	if exists(second) {
		t.Fatal("the escalation outlived its call")
	}

	// danger-full-access, approved once, writes outside the workspace and temp dirs.
	outside := filepath.Join(outsideTempDir(t, "dsh-sandbox-outside-"), "x")
	res = st.bash(t, s, "touch "+outside, escalate("danger-full-access")...)
	expect(t, res, "(no output)", false)
	if got := sandboxOf(t, res); got != sandboxJSON("danger-full-access", false, "", false) || !exists(outside) {
		t.Fatalf("danger-full-access escalation: sandbox %s, written %v", got, exists(outside))
	}
}

// The target must be strictly wider than the call's effective mode (the session
// override counts); a non-widening request asks nobody and runs nothing.
func TestEscalationStrictlyWider(t *testing.T) {
	p := &prompter{answer: container.Accepted}
	st := newStack(t, stackSetup{approval: "ask", bashConfig: map[string]any{"defaultMode": "workspace-write"}})
	ws := workspace(t)
	marker := filepath.Join(ws, "marker")
	s := &container.Session{ID: "wider", Cwd: ws, Prompter: p}
	expect(t, st.bash(t, s, "touch "+marker, escalate("workspace-write")...),
		`Error: sandbox escalation to "workspace-write" is not strictly wider than this call's current "workspace-write" mode`, true)
	full := &container.Session{ID: "full", Cwd: ws, SandboxMode: shell.ModeDangerFullAccess, Prompter: p}
	expect(t, st.bash(t, full, "touch "+marker, escalate("danger-full-access")...),
		`Error: sandbox escalation to "danger-full-access" is not strictly wider than this call's current "danger-full-access" mode`, true)
	if exists(marker) || len(p.asked()) != 0 {
		t.Fatalf("a non-widening escalation ran (%v) or asked (%q)", exists(marker), p.asked())
	}
	// A read-only session override makes workspace-write a widening.
	ro := &container.Session{ID: "ro", Cwd: ws, SandboxMode: shell.ModeReadOnly, Prompter: p}
	expect(t, st.bash(t, ro, "touch "+marker, escalate("workspace-write")...), "(no output)", false)
	if !exists(marker) || len(p.asked()) != 1 {
		t.Fatalf("the widening escalation: ran %v, asked %q", exists(marker), p.asked())
	}
}

// Every approval outcome, with its exact text; nothing runs without allowed-once.
func TestEscalationOutcomes(t *testing.T) {
	ws := workspace(t)
	marker := filepath.Join(ws, "marker")
	run := func(t *testing.T, st *stack, s *container.Session, want string, isError bool) {
		t.Helper()
		expect(t, st.bash(t, s, "touch "+marker, escalate("workspace-write")...), want, isError)
	}

	ask := newStack(t, stackSetup{approval: "ask"})
	for _, tc := range []struct {
		name     string
		prompter *prompter
		want     string
	}{
		{"declined", &prompter{answer: container.Declined}, `Error: the user rejected escalating this command to "workspace-write"`},
		{"cancelled", &prompter{answer: container.Cancelled}, `Error: approval for escalating to "workspace-write" was cancelled`},
		{"channel failure", &prompter{err: errors.New("the client went away")}, `Error: sandbox escalation to "workspace-write" requires approval, but no approval channel is available`},
	} {
		run(t, ask, &container.Session{ID: tc.name, Cwd: ws, Prompter: tc.prompter}, tc.want, true)
		if q := tc.prompter.asked(); len(q) != 1 || !strings.Contains(q[0], "touch "+marker) || !strings.Contains(q[0], "workspace-write") || !strings.Contains(q[0], justification) {
			t.Fatalf("%s: questions %q", tc.name, q)
		}
	}
	run(t, ask, session("no-channel", ws), `Error: sandbox escalation to "workspace-write" requires approval, but no approval channel is available`, true)
	run(t, newStack(t, stackSetup{approval: "deny"}), session("deny", ws), `Error: the user rejected escalating this command to "workspace-write"`, true)
	run(t, newStack(t, stackSetup{}), session("no-service", ws), `Error: sandbox escalation to "workspace-write" requires approval, but no approval service is composed`, true)
	if exists(marker) {
		t.Fatal("an escalation ran without allowed-once")
	}

	accepted := &prompter{answer: container.Accepted}
	run(t, ask, &container.Session{ID: "accepted", Cwd: ws, Prompter: accepted}, "(no output)", false)
	if !exists(marker) || len(accepted.asked()) != 1 {
		t.Fatalf("accepted: ran %v, asked %q", exists(marker), accepted.asked())
	}
}

// The session override is the effective mode of a session's calls, either way.
func TestSessionOverride(t *testing.T) {
	ws := workspace(t)
	marker := filepath.Join(ws, "marker")
	ro := newStack(t, stackSetup{})
	wide := &container.Session{ID: "wide", Cwd: ws, SandboxMode: shell.ModeWorkspaceWrite}
	expect(t, ro.bash(t, wide, "touch "+marker), "(no output)", false)
	if !exists(marker) {
		t.Fatal("a workspace-write session override was not applied")
	}

	ww := newStack(t, stackSetup{bashConfig: map[string]any{"defaultMode": "workspace-write"}})
	narrow := &container.Session{ID: "narrow", Cwd: ws, SandboxMode: shell.ModeReadOnly}
	other := filepath.Join(ws, "other")
	expect(t, ww.bash(t, narrow, "touch "+other), deniedText("touch: cannot touch '"+other+"': Permission denied", "read-only"), false)
	expect(t, ww.bash(t, session("default", ws), "touch "+other), "(no output)", false)
}
