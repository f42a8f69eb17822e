package toolbash_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/prompt"
	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/shell"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func propertyNames(s *tools.Schema) []string {
	var names []string
	for _, p := range s.Properties {
		names = append(names, p.Name)
	}
	return names
}

func bashTool(t *testing.T, h *harness) tools.Tool {
	t.Helper()
	tool, ok := h.tools.Tool("bash")
	if !ok {
		t.Fatalf("no bash tool: %+v", h.rt.Status())
	}
	return tool
}

// Item 1: the schema.
func TestSchema(t *testing.T) {
	cases := []struct {
		name  string
		setup setup
		props []string
	}{
		{"default", setup{}, []string{"command", "description", "timeoutMs", "workdir", "run_in_background"}},
		{"background disabled", setup{toolConfig: map[string]any{"enableRunInBackground": false}}, []string{"command", "description", "timeoutMs", "workdir"}},
		{"confining", setup{mode: "workspace-write"}, []string{"command", "description", "timeoutMs", "workdir", "run_in_background", "sandbox_permissions", "justification"}},
		{"confining, background disabled", setup{mode: "read-only", toolConfig: map[string]any{"enableRunInBackground": false}}, []string{"command", "description", "timeoutMs", "workdir", "sandbox_permissions", "justification"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.setup)
			tool := bashTool(t, h)
			if !reflect.DeepEqual(toolbash.Plugin.Tools, []string{tool.Name}) {
				t.Errorf("the plugin declares the tools %q, and registers %q", toolbash.Plugin.Tools, tool.Name)
			}
			if got := propertyNames(tool.InputSchema); !reflect.DeepEqual(got, tc.props) {
				t.Fatalf("properties = %q, want %q", got, tc.props)
			}
			if !reflect.DeepEqual(tool.InputSchema.Required, []string{"command", "description"}) || tool.InputSchema.Type != "object" {
				t.Fatalf("schema = %+v", tool.InputSchema)
			}
			want := map[string]string{"command": "string", "description": "string", "timeoutMs": "number", "workdir": "string",
				"run_in_background": "boolean", "sandbox_permissions": "string", "justification": "string"}
			for _, p := range tool.InputSchema.Properties {
				if p.Schema.Type != want[p.Name] || p.Schema.Description == "" {
					t.Errorf("%s: %+v", p.Name, p.Schema)
				}
			}
			if sp, ok := tool.InputSchema.Properties.Lookup("sandbox_permissions"); ok && !reflect.DeepEqual(sp.Enum, []string{"workspace-write", "danger-full-access"}) {
				t.Fatalf("enum = %q", sp.Enum)
			}
			b, err := json.Marshal(tool.InputSchema)
			if err != nil || !strings.HasPrefix(string(b), `{"type":"object","properties":{"command":{"type":"string"`) {
				t.Fatalf("schema JSON = %s (%v)", b, err)
			}
		})
	}
}

func TestDescriptionTeaches(t *testing.T) {
	must := []string{"bash -c", "fresh", "workdir", "not cd", "[exit code: N]", "$DSH_", "tail", "[output truncated; full output: <path>]", "timeout"}
	bg := []string{"run_in_background", "job id", "job_output", "job_kill", "notified"}
	sandbox := []string{"[sandbox: file access denied under <mode> mode]", "sandbox_permissions", "justification", "once", "narrowest", "approve"}
	check := func(desc string, phrases []string, present bool) {
		t.Helper()
		for _, p := range phrases {
			if strings.Contains(desc, p) != present {
				t.Errorf("description contains %q = %v, want %v:\n%s", p, !present, present, desc)
			}
		}
	}
	d := toolbash.Description(true, "", false, false)
	check(d, must, true)
	check(d, bg, true)
	check(d, sandbox, false)
	d = toolbash.Description(false, "workspace-write", false, false)
	check(d, must, true)
	check(d, []string{"run_in_background", "job_output"}, false)
	check(d, []string{"must finish within the timeout"}, true)
	check(d, sandbox, true)
	check(d, []string{"default mode: workspace-write"}, true)
}

// Item 3: validation in the documented order; nothing reaches the executor.
func TestValidationOrderAndText(t *testing.T) {
	cases := []struct {
		setup setup
		args  string
		want  string
	}{
		{setup{}, `{"command":"","description":""}`, "invalid command: expected a non-empty string"},
		{setup{}, `{"command":"  \n","description":"x"}`, "invalid command: expected a non-empty string"},
		{setup{}, `{"command":"ls","description":"","timeoutMs":0}`, "invalid description: expected a non-empty string"},
		{setup{}, `{"command":"ls","description":"List","timeoutMs":0}`, "invalid timeoutMs: expected a positive number, got 0"},
		{setup{}, `{"command":"ls","description":"List","timeoutMs":-1.5,"sandbox_permissions":"x"}`, "invalid timeoutMs: expected a positive number, got -1.5"},
		{setup{}, `{"command":"ls","description":"List","sandbox_permissions":"workspace-write"}`, "invalid escalation: sandbox_permissions requires a justification"},
		{setup{mode: "read-only"}, `{"command":"ls","description":"List","sandbox_permissions":"workspace-write"}`, "invalid escalation: sandbox_permissions requires a justification"},
		{setup{mode: "read-only"}, `{"command":"ls","description":"List","justification":"because"}`, "invalid escalation: justification is only valid together with sandbox_permissions"},
		{setup{}, `{"command":"ls","description":"List","justification":"because"}`, "invalid escalation: justification is only valid together with sandbox_permissions"},
		{setup{mode: "read-only"}, `{"command":"ls","description":"List","sandbox_permissions":"workspace-write","justification":"   "}`, "invalid justification: expected a non-empty sentence"},
		{setup{}, `{"command":"ls","description":"List","sandbox_permissions":"workspace-write","justification":7}`, "invalid justification: expected a non-empty sentence"},
		{setup{}, `{"command":"ls","description":"List","sandbox_permissions":"workspace-write","justification":"needs it"}`, "sandbox_permissions is not available in this composition (no sandboxing executor to escalate)"},
		{setup{toolConfig: map[string]any{"enableRunInBackground": false}}, `{"command":"ls","description":"List","run_in_background":true}`, "background execution is disabled for this bash tool"},
		{setup{toolConfig: map[string]any{"enableRunInBackground": false}}, `{"command":"ls","description":"List","run_in_background":"true"}`, "background execution is disabled for this bash tool"},
		{setup{noJobs: true}, `{"command":"ls","description":"List","run_in_background":true}`, "background jobs unavailable: load the jobs plugin"},
		// The registry's own checks come first.
		{setup{}, `{"description":"List"}`, `missing required property "command"`},
		{setup{}, `{"command":1,"description":"List"}`, `"command" must be a string`},
		{setup{}, `{"command":"ls","description":"List","timeoutMs":"5"}`, `"timeoutMs" must be a number`},
		{setup{}, `{"command":"ls","description":"List","run_in_background":1}`, `"run_in_background" must be a boolean`},
		{setup{mode: "read-only"}, `{"command":"ls","description":"List","sandbox_permissions":"read-only","justification":"x"}`, `"sandbox_permissions" must be one of "workspace-write", "danger-full-access"`},
	}
	for _, tc := range cases {
		h := newHarness(t, tc.setup)
		expect(t, h.call(t, nil, tc.args), "Error: "+tc.want, true)
		if n := h.exec.requestCount(); n != 0 {
			t.Fatalf("%s: %d requests reached the executor", tc.args, n)
		}
	}
	// A forced run_in_background:false on a disabled tool is harmless (and ignored).
	h := newHarness(t, setup{toolConfig: map[string]any{"enableRunInBackground": false}})
	h.exec.behave = func(shell.ExecSpec) (shell.RunResult, error) { return shell.RunResult{ExitCode: intp(0)}, nil }
	expect(t, h.call(t, nil, `{"command":"true","description":"Do nothing","run_in_background":false}`), "[ignored unknown argument: run_in_background]\n(no output)", false)
}

// Item 3: the request is built from named arguments only.
func TestRequestFromNamedArgumentsOnly(t *testing.T) {
	h := newHarness(t, setup{})
	h.exec.behave = func(shell.ExecSpec) (shell.RunResult, error) {
		return shell.RunResult{ExitCode: intp(0), Stdout: out("hi\n")}, nil
	}
	s, _ := newSession("sess-1", "/work/a")
	res := h.call(t, s, `{"command":"echo hi","description":"Say hi","timeoutMs":2500,
		"env":{"DSH_SESSION_ID":"spoofed","PATH":"/evil"},"stdin":"secret input","stdoutMaxBytes":1,"dshEnv":{"DSH_HOME":"/x"},"Sandbox":{"Mode":"danger-full-access"}}`)
	// The model learns that the extra keys had no effect.
	expect(t, res, "[ignored unknown arguments: Sandbox, dshEnv, env, stdin, stdoutMaxBytes]\nhi\n", false)
	req := h.exec.lastRequest(t)
	if req.Env != nil || req.Stdin != nil || req.StdoutMaxBytes != nil || req.Sandbox != nil || req.Expiry != "" {
		t.Fatalf("model-supplied fields reached the request: %+v", req)
	}
	want := map[string]string{"DSH_HOME": "/dsh/home", "DSH_SESSION_ID": "sess-1", "DSH_SHELL": "1"}
	if req.Command != "echo hi" || req.Workdir != "/work/a" || req.TimeoutMs == nil || *req.TimeoutMs != 2500 || !reflect.DeepEqual(req.DshEnv, want) {
		t.Fatalf("request = %+v", req)
	}
	var v toolbash.ForegroundValue
	b, _ := json.Marshal(res.Value)
	if err := json.Unmarshal(b, &v); err != nil || v.Kind != "foreground" || v.Stdout.Text != "hi\n" || *v.ExitCode != 0 {
		t.Fatalf("value = %s", b)
	}
}

// Item 4: workdir.
func TestWorkdir(t *testing.T) {
	h := newHarness(t, setup{})
	h.exec.behave = func(shell.ExecSpec) (shell.RunResult, error) { return shell.RunResult{ExitCode: intp(0)}, nil }
	a, _ := newSession("a", "/proj/a")
	b, _ := newSession("b", "/proj/b")
	cases := []struct {
		s    *container.Session
		args string
		want string
	}{
		{a, `{"command":"pwd","description":"Show dir"}`, "/proj/a"},
		{b, `{"command":"pwd","description":"Show dir"}`, "/proj/b"},
		{a, `{"command":"pwd","description":"Show dir","workdir":"sub/dir"}`, "/proj/a/sub/dir"},
		{b, `{"command":"pwd","description":"Show dir","workdir":"../c"}`, "/proj/c"},
		{a, `{"command":"pwd","description":"Show dir","workdir":"/abs/path"}`, "/abs/path"},
		{a, `{"command":"pwd","description":"Show dir"}`, "/proj/a"},
		{nil, `{"command":"pwd","description":"Show dir"}`, ""},
		{&container.Session{ID: "no-cwd"}, `{"command":"pwd","description":"Show dir","workdir":"rel"}`, "rel"},
	}
	for _, tc := range cases {
		h.call(t, tc.s, tc.args)
		if got := h.exec.lastRequest(t).Workdir; got != tc.want {
			t.Errorf("%s: workdir = %q, want %q", tc.args, got, tc.want)
		}
	}
	// Under a confining executor the policy's canonical workspace root is the base.
	hs := newHarness(t, setup{mode: "workspace-write"})
	hs.exec.behave = h.exec.behave
	hs.call(t, a, `{"command":"pwd","description":"Show dir","workdir":"x"}`)
	req := hs.exec.lastRequest(t)
	if req.Workdir != "/canonical/proj/a/x" || req.Sandbox == nil || req.Sandbox.Mode != "workspace-write" || req.Sandbox.WorkspaceRoot != "/canonical/proj/a" {
		t.Fatalf("confined request = %+v", req)
	}
}

func TestInfrastructureErrors(t *testing.T) {
	h := newHarness(t, setup{})
	h.exec.behave = func(shell.ExecSpec) (shell.RunResult, error) {
		return shell.RunResult{}, errors.New("bash-local: workdir /nope: ENOENT: no such file or directory")
	}
	expect(t, h.call(t, nil, `{"command":"ls","description":"List"}`), "Error: bash-local: workdir /nope: ENOENT: no such file or directory", true)
	h.exec.executeErr = errors.New(`sandbox mode "read-only" is requested but no sandbox backend is usable on this host; refusing to run the command unconfined.`)
	expect(t, h.call(t, nil, `{"command":"ls","description":"List"}`), `Error: sandbox mode "read-only" is requested but no sandbox backend is usable on this host; refusing to run the command unconfined.`, true)
	// A failing background spawn registers no job.
	expect(t, h.call(t, nil, `{"command":"ls","description":"List","run_in_background":true}`), `Error: sandbox mode "read-only" is requested but no sandbox backend is usable on this host; refusing to run the command unconfined.`, true)
	expect(t, h.callTool(t, nil, "job_list", `{}`), "(no background jobs)", false)
}

func TestAbortDuringExecution(t *testing.T) {
	h := newHarness(t, setup{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan tools.Result)
	go func() {
		done <- h.tools.Call(ctx, "bash", json.RawMessage(`{"command":"sleep 60","description":"Wait a minute"}`), nil)
	}()
	waitFor(t, 10*1e9, "the command to start", func() bool { return h.exec.requestCount() == 1 })
	cancel()
	res := <-done
	expect(t, res, "Error: tool call aborted", true)
	if v, ok := res.Value.(toolbash.ForegroundValue); !ok || !v.Aborted {
		t.Fatalf("aborted value = %+v", res.Value)
	}
}

// Item 9: sections and tool presence follow the activations.
func TestLifecycle(t *testing.T) {
	h := newHarness(t, setup{noShellRow: true})
	if _, ok := h.tools.Tool("bash"); ok {
		t.Fatal("bash tool registered without a shell provider")
	}
	st := h.rt.Status()
	for _, row := range st.Rows {
		if row.ID == "tool-bash" && (row.State != container.StatePending || !reflect.DeepEqual(row.Missing, []string{"shell"})) {
			t.Fatalf("tool-bash row = %+v", row)
		}
	}
	pv, _ := container.Lookup(h.rt, prompt.Service)
	prompts := pv
	if err := h.rt.Mount(container.Row{ID: "bash", Plugin: "fake-shell"}); err != nil {
		t.Fatal(err)
	}
	bashTool(t, h)
	sections := map[string]prompt.Section{}
	for _, s := range prompts.Sections() {
		sections[s.Name] = s
	}
	if s := sections["tool:bash"]; s.Order != 105 || s.Text != "Check the [exit code: N] marker on every bash result; investigate failures before moving on." {
		t.Fatalf("tool:bash = %+v", s)
	}
	if s := sections["tool:jobs"]; s.Order != 106 || s.Text == "" {
		t.Fatalf("tool:jobs = %+v", s)
	}
	if got := prompts.Compose(nil); !strings.HasPrefix(got, toolbash.PromptText+"\n\n"+sections["tool:jobs"].Text) {
		t.Fatalf("composed prompt = %q", got)
	}
	if err := h.rt.Unmount("bash"); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.tools.Tool("bash"); ok {
		t.Fatal("bash tool survived its executor")
	}
	for _, s := range prompts.Sections() {
		if s.Name == "tool:bash" {
			t.Fatal("tool:bash section survived")
		}
	}
	if err := h.rt.Unmount("jobs"); err != nil {
		t.Fatal(err)
	}
	if len(prompts.Sections()) != 0 {
		t.Fatalf("sections left: %+v", prompts.Sections())
	}
}

// Programmatic callers may pass Go numbers through CallMap.
func TestCallMapGoNumbers(t *testing.T) {
	h := newHarness(t, setup{})
	h.exec.behave = func(shell.ExecSpec) (shell.RunResult, error) { return shell.RunResult{ExitCode: intp(0)}, nil }
	for _, v := range []any{2500, int64(2500), json.Number("2500"), float32(2500)} {
		res := h.tools.CallMap(context.Background(), "bash", map[string]any{"command": "true", "description": "Do nothing", "timeoutMs": v}, nil)
		expect(t, res, "(no output)", false)
		if req := h.exec.lastRequest(t); req.TimeoutMs == nil || *req.TimeoutMs != 2500 {
			t.Fatalf("%T: timeout = %v", v, req.TimeoutMs)
		}
	}
	res := h.tools.CallMap(context.Background(), "bash", map[string]any{"command": "true", "description": "Do nothing", "timeoutMs": -3}, nil)
	expect(t, res, "Error: invalid timeoutMs: expected a positive number, got -3", true)
	res = h.tools.CallMap(context.Background(), "job_output", map[string]any{"job_id": "bash-9", "wait": true, "timeout_ms": 0}, nil)
	expect(t, res, "Error: invalid timeout_ms: expected a positive number, got 0", true)
	res = h.tools.CallMap(context.Background(), "job_output", map[string]any{"job_id": "bash-9", "wait": true, "timeout_ms": 5}, nil)
	expect(t, res, "Error: unknown job bash-9", true)
}
