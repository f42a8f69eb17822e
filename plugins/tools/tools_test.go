package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/tools"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// bashLike is the schema shape of the bash tool: the properties the bash tool declares.
func bashLike() *tools.Schema {
	return &tools.Schema{
		Type: "object",
		Properties: tools.Properties{
			{Name: "command", Schema: &tools.Schema{Type: "string"}},
			{Name: "description", Schema: &tools.Schema{Type: "string"}},
			{Name: "timeoutMs", Schema: &tools.Schema{Type: "number"}},
			{Name: "run_in_background", Schema: &tools.Schema{Type: "boolean"}},
			{Name: "mode", Schema: &tools.Schema{Type: "string", Enum: []string{"read-only", "workspace-write"}}},
			{Name: "count", Schema: &tools.Schema{Type: "integer"}},
		},
		Required: []string{"command", "description"},
	}
}

// harness composes the tools plugin and a plugin that registers tools built by make.
type harness struct {
	rt    *container.Runtime
	calls atomic.Int32
	last  atomic.Pointer[tools.Call]
}

func newHarness(t *testing.T, extra ...container.Plugin) *harness {
	t.Helper()
	return newHarnessLogging(t, quiet, extra...)
}

// newHarnessLogging is newHarness with the runtime logging to log.
func newHarnessLogging(t *testing.T, log *slog.Logger, extra ...container.Plugin) *harness {
	t.Helper()
	h := &harness{}
	register := container.Define(container.Declaration[container.NoConfig]{
		Name:   "echo",
		Inject: container.Keys{tools.Service},
		Apply: func(a *container.Activation, _ container.NoConfig) error {
			reg, err := container.Injected(a, tools.Service)
			if err != nil {
				return err
			}
			return reg.Register(a, tools.Tool{
				Name:        "bash",
				Description: "runs things",
				InputSchema: bashLike(),
				Execute: func(ctx context.Context, call tools.Call) (tools.Result, error) {
					h.calls.Add(1)
					h.last.Store(&call)
					switch call.Args["command"] {
					case "wait":
						<-ctx.Done()
						return tools.Result{Text: "late"}, nil
					case "fail":
						return tools.Result{}, errors.New("spawn failed: ENOENT")
					case "panic":
						panic("oops")
					}
					return tools.Result{Text: "ran " + call.Args["command"].(string), Value: map[string]any{"ok": true}}, nil
				},
			})
		},
	})
	cat, err := container.NewCatalog(append([]container.Plugin{tools.Plugin, register}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	h.rt = container.NewRuntime(cat, container.Options{Logger: log})
	t.Cleanup(h.rt.Close)
	rows := []container.Row{{ID: "tools", Plugin: "@deepseek-ai/dsh-tools"}, {ID: "echo", Plugin: "echo"}}
	for _, p := range extra {
		rows = append(rows, container.Row{ID: p.Name, Plugin: p.Name})
	}
	if err := h.rt.Compose("test", rows); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) registry(t *testing.T) *tools.Registry {
	t.Helper()
	v, ok := container.Lookup(h.rt, tools.Service)
	if !ok {
		t.Fatal("no tools service")
	}
	return v
}

func (h *harness) call(t *testing.T, args string) tools.Result {
	t.Helper()
	return h.registry(t).Call(context.Background(), "bash", json.RawMessage(args), nil)
}

// argument validation happens in the registry, before Execute, with these
// exact messages.
func TestValidationMessages(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct{ args, text string }{
		{`{"description":"d"}`, `Error: missing required property "command"`},
		{`{}`, `Error: missing required property "command"`},
		{``, `Error: missing required property "command"`},
		{`{"command":"ls"}`, `Error: missing required property "description"`},
		{`{"command":5,"description":"d"}`, `Error: "command" must be a string`},
		{`{"command":null,"description":"d"}`, `Error: "command" must be a string`},
		{`{"command":"ls","description":"d","timeoutMs":"100"}`, `Error: "timeoutMs" must be a number`},
		{`{"command":"ls","description":"d","run_in_background":"yes"}`, `Error: "run_in_background" must be a boolean`},
		{`{"command":"ls","description":"d","run_in_background":1}`, `Error: "run_in_background" must be a boolean`},
		{`{"command":"ls","description":"d","mode":"root"}`, `Error: "mode" must be one of "read-only", "workspace-write"`},
		{`{"command":"ls","description":"d","count":1.5}`, `Error: "count" must be an integer`},
		{`[1]`, `Error: invalid arguments: expected a JSON object`},
		{`{"command":"ls"} {}`, `Error: invalid arguments: trailing data after the JSON object`},
	} {
		res := h.call(t, c.args)
		if res.Text != c.text || !res.IsError {
			t.Errorf("args %s: got %q (isError %v), want %q", c.args, res.Text, res.IsError, c.text)
		}
	}
	if n := h.calls.Load(); n != 0 {
		t.Fatalf("Execute ran %d times on invalid arguments", n)
	}
	res := h.call(t, `{"command":"ls","description":"d","timeoutMs":100,"run_in_background":false,"mode":"read-only","count":3}`)
	if res.Text != "ran ls" || res.IsError {
		t.Fatalf("valid call: %+v", res)
	}
}

// extra keys never reach the executor's arguments; the tool may still see them.
func TestExtraKeysDropped(t *testing.T) {
	h := newHarness(t)
	res := h.call(t, `{"command":"ls","description":"d","env":{"A":"1"},"stdin":"x","timeoutMs":5}`)
	if res.IsError {
		t.Fatal(res.Text)
	}
	call := h.last.Load()
	keys := slices.Sorted(maps.Keys(call.Args))
	if !slices.Equal(keys, []string{"command", "description", "timeoutMs"}) {
		t.Fatalf("args %v", call.Args)
	}
	extra := slices.Sorted(maps.Keys(call.Extra))
	if !slices.Equal(extra, []string{"env", "stdin"}) {
		t.Fatalf("extra %v", call.Extra)
	}
	// The model is told which arguments had no effect, on a first line of their own.
	if res.Text != "[ignored unknown arguments: env, stdin]\nran ls" {
		t.Errorf("text %q", res.Text)
	}
	if res := h.call(t, `{"command":"ls","description":"d","timeout":300}`); res.Text != "[ignored unknown argument: timeout]\nran ls" {
		t.Errorf("one unknown key: %q", res.Text)
	}
	// An error result is the error alone.
	if res := h.call(t, `{"command":5,"description":"d","timeout":300}`); res.Text != `Error: "command" must be a string` {
		t.Errorf("invalid call with an unknown key: %q", res.Text)
	}
	// Programmatic callers may pass Go numbers.
	res = h.registry(t).CallMap(context.Background(), "bash", map[string]any{"command": "ls", "description": "d", "timeoutMs": 5, "count": int64(2)}, nil)
	if res.IsError {
		t.Fatal(res.Text)
	}
}

// a call cancelled before dispatch never runs; one cancelled while running
// reports the abort.
func TestAborts(t *testing.T) {
	h := newHarness(t)
	reg := h.registry(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := reg.Call(ctx, "bash", json.RawMessage(`{"command":"ls","description":"d"}`), nil)
	if res.Text != "Error: tool call aborted before dispatch" || !res.IsError || h.calls.Load() != 0 {
		t.Fatalf("pre-cancelled: %+v, %d calls", res, h.calls.Load())
	}
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan tools.Result)
	go func() { done <- reg.Call(ctx, "bash", json.RawMessage(`{"command":"wait","description":"d"}`), nil) }()
	deadline := time.Now().Add(10 * time.Second)
	for h.calls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Execute never started")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	res = <-done
	if res.Text != "Error: tool call aborted" || !res.IsError {
		t.Fatalf("cancelled while running: %+v", res)
	}
}

// Infrastructure errors, panics and unknown tools are Error: results.
func TestFailuresAreResults(t *testing.T) {
	h := newHarness(t)
	if res := h.call(t, `{"command":"fail","description":"d"}`); res.Text != "Error: spawn failed: ENOENT" || !res.IsError {
		t.Fatalf("error: %+v", res)
	}
	if res := h.call(t, `{"command":"panic","description":"d"}`); res.Text != `Error: tool "bash" panicked: oops` || !res.IsError {
		t.Fatalf("panic: %+v", res)
	}
	res := h.registry(t).Call(context.Background(), "nope", nil, nil)
	if res.Text != `Error: unknown tool "nope"` || !res.IsError {
		t.Fatalf("unknown: %+v", res)
	}
	// A typo gets the registered name it is closest to.
	res = h.registry(t).Call(context.Background(), "bsh", nil, nil)
	if res.Text != `Error: unknown tool "bsh" (did you mean "bash"?)` || !res.IsError {
		t.Fatalf("typo: %+v", res)
	}
	if r := tools.Errorf("bad %s", "thing"); r.Text != "Error: bad thing" || !r.IsError {
		t.Fatalf("Errorf: %+v", r)
	}
}

// a registration is owned by the registering activation and disappears when
// it unloads; when the registry's provider is replaced, the registrant re-registers in
// the new registry.
func TestRegistrationOwnedByActivation(t *testing.T) {
	h := newHarness(t)
	reg := h.registry(t)
	if _, ok := reg.Tool("bash"); !ok {
		t.Fatal("bash not registered")
	}
	if err := h.rt.Unmount("echo"); err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.Tool("bash"); ok || len(reg.Tools()) != 0 {
		t.Fatal("registration survived its activation")
	}
	if res := reg.Call(context.Background(), "bash", json.RawMessage(`{"command":"ls","description":"d"}`), nil); res.Text != `Error: unknown tool "bash"` {
		t.Fatalf("after unload: %q", res.Text)
	}
	if err := h.rt.Mount(container.Row{ID: "echo", Plugin: "echo"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.Tool("bash"); !ok {
		t.Fatal("not registered again")
	}
	// Replace the registry itself: the old one is emptied, the new one filled.
	if err := h.rt.Unmount("tools"); err != nil {
		t.Fatal(err)
	}
	if len(reg.Tools()) != 0 {
		t.Fatal("old registry not emptied")
	}
	if err := h.rt.Mount(container.Row{ID: "tools2", Plugin: "tools"}); err != nil {
		t.Fatal(err)
	}
	if fresh := h.registry(t); fresh == reg || len(fresh.Tools()) != 1 {
		t.Fatal("dependent did not register in the new registry")
	}
}

// registering a name twice fails loudly: the second registrant's activation
// fails with the reason, the first keeps its tool.
func TestDuplicateToolNameFails(t *testing.T) {
	dup := container.Define(container.Declaration[container.NoConfig]{Name: "dup", Inject: container.Keys{tools.Service}, Apply: func(a *container.Activation, _ container.NoConfig) error {
		reg, err := container.Injected(a, tools.Service)
		if err != nil {
			return err
		}
		return reg.Register(a, tools.Tool{Name: "bash", Execute: func(context.Context, tools.Call) (tools.Result, error) {
			return tools.Result{Text: "impostor"}, nil
		}})
	}})
	h := newHarness(t, dup)
	var st container.RowStatus
	for _, rs := range h.rt.Status().Rows {
		if rs.ID == "dup" {
			st = rs
		}
	}
	if st.State != container.StateFailed || st.Error != `tools: tool "bash" is already registered` {
		t.Fatalf("dup: %s %q", st.State, st.Error)
	}
	if res := h.call(t, `{"command":"ls","description":"d"}`); res.Text != "ran ls" {
		t.Fatalf("the first tool was replaced: %q", res.Text)
	}
	reg := h.registry(t)
	if err := reg.Register(scope{}, tools.Tool{Name: "", Execute: nil}); err == nil {
		t.Fatal("a nameless tool registered")
	}
}

// scope is a Scope that never ends.
type scope struct{}

func (scope) Defer(func())             {}
func (scope) Context() context.Context { return context.Background() }

// Tools are listed by name; schemas marshal with properties in declaration order.
func TestToolsListAndSchemaJSON(t *testing.T) {
	reg := tools.NewRegistry()
	exec := func(context.Context, tools.Call) (tools.Result, error) { return tools.Result{}, nil }
	for _, n := range []string{"job_output", "bash", "job_list"} {
		if err := reg.Register(scope{}, tools.Tool{Name: n, Execute: exec}); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for _, tl := range reg.Tools() {
		names = append(names, tl.Name)
	}
	if !sort.StringsAreSorted(names) || len(names) != 3 {
		t.Fatalf("names %q", names)
	}
	data, err := json.Marshal(bashLike())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","properties":{"command":{"type":"string"},"description":{"type":"string"},"timeoutMs":{"type":"number"},` +
		`"run_in_background":{"type":"boolean"},"mode":{"type":"string","enum":["read-only","workspace-write"]},"count":{"type":"integer"}},"required":["command","description"]}`
	if string(data) != want {
		t.Fatalf("schema JSON\n got  %s\n want %s", data, want)
	}
	var back tools.Schema
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, p := range back.Properties {
		order = append(order, p.Name)
	}
	if strings.Join(order, ",") != "command,description,timeoutMs,run_in_background,mode,count" {
		t.Fatalf("round-trip order %q", order)
	}
}

func TestDecodeArgs(t *testing.T) {
	for in, want := range map[string]int{``: 0, `null`: 0, ` {"a":1} `: 1} {
		m, err := tools.DecodeArgs(json.RawMessage(in))
		if err != nil || len(m) != want {
			t.Errorf("%q: %v %v", in, m, err)
		}
	}
	for _, in := range []string{`"x"`, `{`, `{} x`} {
		if _, err := tools.DecodeArgs(json.RawMessage(in)); err == nil {
			t.Errorf("%q decoded", in)
		}
	}
}

func TestNonObjectInputSchemaRejected(t *testing.T) {
	reg := tools.NewRegistry()
	var sc scope
	err := reg.Register(sc, tools.Tool{Name: "odd", InputSchema: &tools.Schema{Type: "string"},
		Execute: func(context.Context, tools.Call) (tools.Result, error) { return tools.Result{}, nil }})
	if err == nil || err.Error() != `tools: tool "odd": input schema must have type "object", got "string"` {
		t.Fatalf("err = %v", err)
	}
	if _, ok := reg.Tool("odd"); ok {
		t.Fatal("a refused tool was registered")
	}
}

// A call for a tool the registry does not hold asks ExplainUnavailable's function first:
// a tool whose row is not active says why instead of reading as unknown.
func TestUnavailableToolSaysWhy(t *testing.T) {
	reg := tools.NewRegistry()
	reg.ExplainUnavailable(func(tool string) (string, bool) {
		return "row tool-bash is pending (missing shell)", tool == "bash"
	})
	if res := reg.Call(context.Background(), "bash", nil, nil); res.Text != `Error: tool "bash" is unavailable: row tool-bash is pending (missing shell)` || !res.IsError {
		t.Errorf("unavailable: %+v", res)
	}
	if msg, unavailable := reg.Missing("grep"); msg != `unknown tool "grep"` || unavailable {
		t.Errorf("Missing(grep) = %q, %v", msg, unavailable)
	}
}
