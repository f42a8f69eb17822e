package tools_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/approval"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// gatePlugin is a plugin that registers gates (and restrictions) in the registry.
func gatePlugin(name string, gates []tools.Gate, restrictions ...tools.Restriction) container.Plugin {
	return container.Define(container.Declaration[container.NoConfig]{
		Name:   name,
		Inject: container.Keys{tools.Service},
		Apply: func(a *container.Activation, _ container.NoConfig) error {
			reg, err := container.Injected(a, tools.Service)
			if err != nil {
				return err
			}
			for _, g := range gates {
				if err := reg.AddGate(a, g); err != nil {
					return err
				}
			}
			for _, rs := range restrictions {
				if err := reg.Restrict(a, rs); err != nil {
					return err
				}
			}
			return nil
		},
	})
}

// answering is a gate that always gives v.
func answering(name string, order int, v tools.Verdict) tools.Gate {
	return tools.Gate{Name: name, Order: order, Check: func(context.Context, string, tools.Call) tools.Verdict { return v }}
}

// journal records which gates ran, with the command each saw.
type journal struct {
	mu  sync.Mutex
	ran []string
}

func (j *journal) add(s string) { j.mu.Lock(); j.ran = append(j.ran, s); j.mu.Unlock() }
func (j *journal) list() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.ran)
}

// recording is a gate that records the command it saw, then answers decide(call).
func (j *journal) recording(name string, order int, decide func(tools.Call) tools.Verdict) tools.Gate {
	return tools.Gate{Name: name, Order: order, Check: func(_ context.Context, tool string, call tools.Call) tools.Verdict {
		j.add(name + ":" + call.Args["command"].(string))
		return decide(call)
	}}
}

func pass(tools.Call) tools.Verdict { return tools.Verdict{} }

const lsArgs = `{"command":"ls","description":"d"}`

// The strictest answer wins: deny > ask > allow; all pass (or allow) runs the call.
// A deny runs nothing and says what denied it and why.
func TestWaterfallStrictestWins(t *testing.T) {
	deny := tools.Verdict{Decision: tools.Deny, Source: `rule "no-ls"`, Reason: "listing is forbidden"}
	for _, c := range []struct {
		name  string
		gates []tools.Gate
		text  string
	}{
		{"no objection", []tools.Gate{answering("a", 1, tools.Verdict{}), answering("b", 2, tools.Verdict{})}, "ran ls"},
		{"allow", []tools.Gate{answering("a", 1, tools.Verdict{Decision: tools.Allow, Source: `rule "ls"`})}, "ran ls"},
		{"deny beats allow", []tools.Gate{answering("a", 1, tools.Verdict{Decision: tools.Allow}), answering("b", 2, deny)},
			`Error: command denied by policy: rule "no-ls" (listing is forbidden)`},
		{"deny beats ask", []tools.Gate{answering("a", 1, tools.Verdict{Decision: tools.Ask, Source: `rule "ask"`}), answering("b", 2, deny)},
			`Error: command denied by policy: rule "no-ls" (listing is forbidden)`},
		{"deny without a reason or source", []tools.Gate{answering("plain", 1, tools.Verdict{Decision: tools.Deny})},
			`Error: command denied by policy: gate "plain"`},
		// No approval service in this composition: the ask cannot be put.
		{"ask beats allow", []tools.Gate{answering("a", 1, tools.Verdict{Decision: tools.Allow}), answering("b", 2, tools.Verdict{Decision: tools.Ask, Source: `rule "git *"`})},
			`Error: this command needs approval (rule "git *"), but no approval channel is available`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, gatePlugin("gates", c.gates))
			res := h.call(t, lsArgs)
			if res.Text != c.text || res.IsError != strings.HasPrefix(c.text, "Error:") {
				t.Fatalf("got %q (isError %v), want %q", res.Text, res.IsError, c.text)
			}
			if ran := h.calls.Load() > 0; ran != !res.IsError {
				t.Fatalf("Execute ran = %v for %q", ran, res.Text)
			}
		})
	}
}

// Gates run by order, then registration; a deny ends the waterfall (nothing stricter
// exists) and the first of equally strict answers is the source.
func TestWaterfallOrder(t *testing.T) {
	j := &journal{}
	allow := func(src string) func(tools.Call) tools.Verdict {
		return func(tools.Call) tools.Verdict { return tools.Verdict{Decision: tools.Allow, Source: src} }
	}
	gates := []tools.Gate{
		j.recording("late", 300, pass),
		j.recording("policy-1", tools.OrderPolicy, allow(`rule "first"`)),
		j.recording("early", tools.OrderRewrite, pass),
		j.recording("policy-2", tools.OrderPolicy, allow(`rule "second"`)),
	}
	rec := &logRecorder{}
	h := newHarnessLogging(t, slog.New(rec), gatePlugin("gates", gates))
	if res := h.call(t, lsArgs); res.Text != "ran ls" {
		t.Fatal(res.Text)
	}
	if got := j.list(); !slices.Equal(got, []string{"early:ls", "policy-1:ls", "policy-2:ls", "late:ls"}) {
		t.Fatalf("order %q", got)
	}
	// The allow is logged at debug, with the first allow's source.
	if r := rec.find("tool call decided"); r == nil || r.level != slog.LevelDebug || r.attrs["source"] != `rule "first"` || r.attrs["decision"] != "allow" {
		t.Fatalf("decision log: %+v", r)
	}

	j2 := &journal{}
	deny := func(src string) func(tools.Call) tools.Verdict {
		return func(tools.Call) tools.Verdict { return tools.Verdict{Decision: tools.Deny, Source: src} }
	}
	h = newHarnessLogging(t, slog.New(rec), gatePlugin("gates", []tools.Gate{
		j2.recording("a", 1, pass), j2.recording("b", 2, deny(`rule "b"`)), j2.recording("c", 3, deny(`rule "c"`)),
	}))
	if res := h.call(t, lsArgs); res.Text != `Error: command denied by policy: rule "b"` {
		t.Fatal(res.Text)
	}
	if got := j2.list(); !slices.Equal(got, []string{"a:ls", "b:ls"}) {
		t.Fatalf("gates after a deny ran: %q", got)
	}
	if r := rec.find("tool call decided"); r == nil || r.level != slog.LevelInfo || r.attrs["source"] != `rule "b"` || r.attrs["decision"] != "deny" {
		t.Fatalf("deny log: %+v", r)
	}
}

// A gate's replacement arguments are validated against the schema again; every gate
// that answered for the old arguments answers again for the new ones, and Execute gets
// them. A gate replaces a call's arguments once.
func TestWaterfallReplacementArguments(t *testing.T) {
	replace := func(command string) func(tools.Call) tools.Verdict {
		return func(call tools.Call) tools.Verdict {
			if call.Args["command"] == command {
				return tools.Verdict{Args: map[string]any{"command": command, "description": "d"}} // the same: no replacement
			}
			return tools.Verdict{Args: map[string]any{"command": command, "description": "d", "note": 1}}
		}
	}
	j := &journal{}
	h := newHarness(t, gatePlugin("gates", []tools.Gate{
		j.recording("policy", tools.OrderPolicy, pass),
		j.recording("rewriter", 300, replace("echo hi")),
		j.recording("after", 400, pass),
	}))
	res := h.call(t, lsArgs)
	if res.Text != "[ignored unknown argument: note]\nran echo hi" {
		t.Fatalf("result %q", res.Text)
	}
	if got := j.list(); !slices.Equal(got, []string{"policy:ls", "rewriter:ls", "policy:echo hi", "after:echo hi"}) {
		t.Fatalf("gates ran %q", got)
	}
	if last := h.last.Load(); last.Args["command"] != "echo hi" || last.Extra["note"] != 1 {
		t.Fatalf("Execute got %+v", last)
	}

	// A gate that answers for the new arguments may deny them.
	h = newHarness(t, gatePlugin("gates", []tools.Gate{
		{Name: "no-echo", Order: 1, Check: func(_ context.Context, _ string, call tools.Call) tools.Verdict {
			if strings.HasPrefix(call.Args["command"].(string), "echo") {
				return tools.Verdict{Decision: tools.Deny, Source: `rule "echo *"`}
			}
			return tools.Verdict{}
		}},
		j.recording("rewriter", 2, replace("echo sneaky")),
	}))
	if res := h.call(t, lsArgs); res.Text != `Error: command denied by policy: rule "echo *"` || h.calls.Load() != 0 {
		t.Fatalf("replacement bypassed an earlier gate: %q", res.Text)
	}

	// Invalid replacements are refused with the schema's message, naming their source.
	h = newHarness(t, gatePlugin("gates", []tools.Gate{answering("hook", 1, tools.Verdict{Source: `hook "fmt"`, Args: map[string]any{"command": 5, "description": "d"}})}))
	if res := h.call(t, lsArgs); res.Text != `Error: invalid arguments from hook "fmt": "command" must be a string` || h.calls.Load() != 0 {
		t.Fatalf("invalid replacement: %q", res.Text)
	}

	// Two gates that keep rewriting each other: the second replacement of one denies.
	h = newHarness(t, gatePlugin("gates", []tools.Gate{
		{Name: "a", Order: 1, Check: func(context.Context, string, tools.Call) tools.Verdict {
			return tools.Verdict{Args: map[string]any{"command": "a", "description": "d"}}
		}},
		{Name: "b", Order: 2, Check: func(context.Context, string, tools.Call) tools.Verdict {
			return tools.Verdict{Args: map[string]any{"command": "b", "description": "d"}}
		}},
	}))
	if res := h.call(t, lsArgs); res.Text != `Error: command denied by policy: gate "a" (replaced the arguments a second time)` || h.calls.Load() != 0 {
		t.Fatalf("ping-pong: %q", res.Text)
	}
}

// Gates belong to the activation that added them; a gate for other tools is not asked.
func TestGatesOwnedByActivation(t *testing.T) {
	denyAll := answering("deny-all", 1, tools.Verdict{Decision: tools.Deny, Source: `rule "*"`})
	other := answering("other-tool", 1, tools.Verdict{Decision: tools.Deny, Source: `rule "other"`})
	other.Tools = []string{"job_kill"}
	h := newHarness(t, gatePlugin("gates", []tools.Gate{denyAll}), gatePlugin("others", []tools.Gate{other}))
	if res := h.call(t, lsArgs); res.Text != `Error: command denied by policy: rule "*"` {
		t.Fatal(res.Text)
	}
	if err := h.rt.Unmount("gates"); err != nil {
		t.Fatal(err)
	}
	if res := h.call(t, lsArgs); res.Text != "ran ls" {
		t.Fatalf("after the gate's row left: %q", res.Text)
	}
	if err := h.registry(t).AddGate(scope{}, tools.Gate{Name: "x"}); err == nil {
		t.Fatal("a gate without Check was added")
	}
}

// A gate that panics denies the call, naming itself.
func TestGatePanicDenies(t *testing.T) {
	h := newHarness(t, gatePlugin("gates", []tools.Gate{{Name: "fragile", Check: func(context.Context, string, tools.Call) tools.Verdict {
		panic("index out of range")
	}}}))
	if res := h.call(t, lsArgs); res.Text != `Error: command denied by policy: gate "fragile" (the gate failed: index out of range)` || h.calls.Load() != 0 {
		t.Fatalf("%q", res.Text)
	}
}

// sessionPrompter answers Confirm and ConfirmForSession, recording which was asked.
type sessionPrompter struct {
	answer container.Answer
	mu     sync.Mutex
	asked  []string // "once: <message>" or "session: <message>"
}

func (p *sessionPrompter) Confirm(_ context.Context, m string) (container.Answer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, "once: "+m)
	return p.answer, nil
}

func (p *sessionPrompter) ConfirmForSession(_ context.Context, m string) (container.Answer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, "session: "+m)
	return p.answer, nil
}

func (p *sessionPrompter) questions() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.asked)
}

// An ask goes to the approval service with the command, the source and the reason; each
// outcome has its text, and allowed-for-session makes every gate that asked remember.
func TestWaterfallAsk(t *testing.T) {
	var remembered []string
	var mu sync.Mutex
	asking := func(name string) tools.Gate {
		return answering(name, 1, tools.Verdict{Decision: tools.Ask, Source: `rule "` + name + `"`, Reason: "it publishes"})
	}
	rememberingGate := func(name string) tools.Gate {
		return tools.Gate{Name: name, Check: func(context.Context, string, tools.Call) tools.Verdict {
			return tools.Verdict{Decision: tools.Ask, Source: `rule "` + name + `"`, Reason: "it publishes",
				Remember: func() { mu.Lock(); remembered = append(remembered, name); mu.Unlock() }}
		}}
	}
	for _, c := range []struct {
		name      string
		gates     []tools.Gate
		answer    container.Answer
		text      string
		asked     string // the prompter method asked
		remembers []string
	}{
		{"accepted once", []tools.Gate{rememberingGate("push")}, container.Accepted, "ran ls", "session", nil},
		{"for the session", []tools.Gate{rememberingGate("push"), rememberingGate("publish")}, container.AcceptedForSession, "ran ls", "session", []string{"push", "publish"}},
		{"declined", []tools.Gate{rememberingGate("push")}, container.Declined, `Error: the user did not allow this command (rule "push")`, "session", nil},
		{"cancelled", []tools.Gate{rememberingGate("push")}, container.Cancelled, `Error: approval of this command was cancelled (rule "push")`, "session", nil},
		// One asking gate cannot remember: the user is asked once-or-not.
		{"not rememberable", []tools.Gate{rememberingGate("push"), asking("plain")}, container.AcceptedForSession, "ran ls", "once", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			remembered = nil
			h := newHarness(t, approval.Plugin, gatePlugin("gates", c.gates))
			p := &sessionPrompter{answer: c.answer}
			session := &container.Session{ID: "s1", Cwd: "/w", Prompter: p}
			res := h.registry(t).Call(context.Background(), "bash", json.RawMessage(`{"command":"git push","description":"d"}`), session)
			want := strings.ReplaceAll(c.text, "ran ls", "ran git push")
			if res.Text != want {
				t.Fatalf("got %q, want %q", res.Text, want)
			}
			q := p.questions()
			if len(q) != 1 || !strings.HasPrefix(q[0], c.asked+": ") {
				t.Fatalf("asked %q, want one %s question", q, c.asked)
			}
			for _, part := range []string{"Command:\n  git push\n", `Policy: rule "push" (it publishes)`} {
				if !strings.Contains(q[0], part) {
					t.Errorf("question lacks %q:\n%s", part, q[0])
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(remembered, c.remembers) {
				t.Fatalf("remembered %q, want %q", remembered, c.remembers)
			}
		})
	}

	// No channel: unavailable. No approval service: unavailable, and the log says why.
	h := newHarness(t, approval.Plugin, gatePlugin("gates", []tools.Gate{rememberingGate("push")}))
	if res := h.registry(t).Call(context.Background(), "bash", json.RawMessage(lsArgs), &container.Session{ID: "s"}); res.Text != `Error: this command needs approval (rule "push"), but no approval channel is available` {
		t.Fatal(res.Text)
	}
	rec := &logRecorder{}
	h = newHarnessLogging(t, slog.New(rec), gatePlugin("gates", []tools.Gate{rememberingGate("push")}))
	p := &sessionPrompter{answer: container.Accepted}
	if res := h.registry(t).Call(context.Background(), "bash", json.RawMessage(lsArgs), &container.Session{ID: "s", Prompter: p}); res.Text != `Error: this command needs approval (rule "push"), but no approval channel is available` {
		t.Fatal(res.Text)
	}
	if len(p.questions()) != 0 || rec.find("a gate asks for approval, but no approval service is composed: unavailable") == nil {
		t.Fatalf("asked %q; log %+v", p.questions(), rec.all())
	}
	if r := rec.find("tool call decided"); r == nil || r.attrs["decision"] != "ask" || r.attrs["approval"] != "unavailable" || r.level != slog.LevelInfo {
		t.Fatalf("decision log %+v", r)
	}
}

// Restrictions hide tools from a session: left out of its list, refused when called,
// before validation; Shape gives the session its own schema.
func TestRestrictionsAndShapes(t *testing.T) {
	readerOnly := tools.Restriction{Name: "roles", Hide: func(s *container.Session, tool string) (string, bool) {
		if s != nil && s.Role == "reader" && tool == "bash" {
			return `role "reader"`, true
		}
		return "", false
	}}
	h := newHarness(t, gatePlugin("roles", nil, readerOnly))
	reg := h.registry(t)
	exec := func(context.Context, tools.Call) (tools.Result, error) { return tools.Result{Text: "listed"}, nil }
	narrow := &tools.Schema{Type: "object"}
	if err := reg.Register(scope{}, tools.Tool{Name: "list", Description: "wide", Execute: exec,
		Shape: func(s *container.Session) (string, *tools.Schema) {
			if s != nil && s.Role == "reader" {
				return "narrow", narrow
			}
			return "", nil
		}}); err != nil {
		t.Fatal(err)
	}
	reader := &container.Session{ID: "r", Role: "reader"}
	names := func(ts []tools.Tool) (out []string) {
		for _, t := range ts {
			out = append(out, t.Name+"="+t.Description)
		}
		return out
	}
	if got := names(reg.ToolsFor(reader)); !slices.Equal(got, []string{"list=narrow"}) {
		t.Fatalf("reader sees %q", got)
	}
	if got := names(reg.ToolsFor(&container.Session{ID: "w"})); !slices.Equal(got, []string{"bash=runs things", "list=wide"}) {
		t.Fatalf("writer sees %q", got)
	}
	if got := reg.ToolsFor(reader)[0].InputSchema; got != narrow {
		t.Fatalf("shaped schema %+v", got)
	}
	if res := reg.Call(context.Background(), "bash", json.RawMessage(`{}`), reader); res.Text != `Error: tool "bash" is not available to this session (role "reader")` || !res.IsError {
		t.Fatalf("hidden tool: %q", res.Text)
	}
	if res := reg.Call(context.Background(), "bash", json.RawMessage(lsArgs), &container.Session{ID: "w"}); res.Text != "ran ls" {
		t.Fatal(res.Text)
	}
	if len(reg.Tools()) != 2 {
		t.Fatal("Tools is filtered")
	}
	// Without any restriction, a session with a role sees nothing: fail closed.
	if err := h.rt.Unmount("roles"); err != nil {
		t.Fatal(err)
	}
	if got := reg.ToolsFor(reader); len(got) != 0 {
		t.Fatalf("with no roles active, reader sees %q", names(got))
	}
	if res := reg.Call(context.Background(), "list", nil, reader); res.Text != `Error: tool "list" is not available to this session (role "reader": no roles are active)` {
		t.Fatal(res.Text)
	}
	if res := reg.Call(context.Background(), "list", nil, &container.Session{ID: "w"}); res.Text != "listed" {
		t.Fatal(res.Text)
	}
}

// logRecorder keeps every record with its attributes flattened.
type logRecorder struct {
	mu      sync.Mutex
	records []logRecord
	attrs   []slog.Attr
}

type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool { rec.attrs[a.Key] = a.Value.String(); return true })
	h.mu.Lock()
	h.records = append(h.records, rec)
	h.mu.Unlock()
	return nil
}
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

// find returns the last record with msg.
func (h *logRecorder) find(msg string) *logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.records) - 1; i >= 0; i-- {
		if h.records[i].msg == msg {
			r := h.records[i]
			return &r
		}
	}
	return nil
}

func (h *logRecorder) all() []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.records)
}
