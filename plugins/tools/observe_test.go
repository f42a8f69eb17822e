package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/approval"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// observerPlugin is a plugin that adds observers (and gates) to the registry.
func observerPlugin(name string, observers []tools.Observer, gates ...tools.Gate) container.Plugin {
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
			for _, o := range observers {
				if err := reg.Observe(a, o); err != nil {
					return err
				}
			}
			return nil
		},
	})
}

// events records what an observer saw, as copies.
type events struct {
	mu   sync.Mutex
	seen []tools.Event
}

func (e *events) observer(name string, order int) tools.Observer {
	return tools.Observer{Name: name, Order: order, Observe: func(_ context.Context, ev *tools.Event) {
		e.mu.Lock()
		defer e.mu.Unlock()
		cp := *ev
		res := *ev.Result
		cp.Result = &res
		e.seen = append(e.seen, cp)
	}}
}

func (e *events) list() []tools.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.seen)
}

// An observer sees each call once it ended: the arguments that ran, the decision and
// its source, whether the tool ran, the result and how long it took. Calls with invalid
// arguments are not observed; a call a restriction refuses is a deny.
func TestObserverSeesDecisionsAndResults(t *testing.T) {
	rec := &events{}
	deny := tools.Verdict{Decision: tools.Deny, Source: `rule "no-rm"`, Reason: "destructive"}
	gate := tools.Gate{Name: "rules", Check: func(_ context.Context, _ string, call tools.Call) tools.Verdict {
		if call.Args["command"] == "rm" {
			return deny
		}
		return tools.Verdict{}
	}}
	h := newHarness(t, observerPlugin("audit", []tools.Observer{rec.observer("audit", tools.OrderRecord)}, gate))
	before := time.Now()
	if res := h.call(t, `{"command":"ls","description":"d","bogus":1}`); !strings.HasSuffix(res.Text, "ran ls") {
		t.Fatal(res.Text)
	}
	if res := h.call(t, `{"command":"rm","description":"d"}`); res.Text != `Error: command denied by policy: rule "no-rm" (destructive)` {
		t.Fatal(res.Text)
	}
	h.call(t, `{"command":1}`) // invalid: not observed
	seen := rec.list()
	if len(seen) != 2 {
		t.Fatalf("observed %d calls, want 2: %+v", len(seen), seen)
	}
	ok := seen[0]
	if ok.Tool != "bash" || ok.Args["command"] != "ls" || ok.Args["bogus"] != float64(1) || ok.Decision.Decision != tools.Allow ||
		ok.Decision.Source != "" || !ok.Ran || ok.Approval != "" || ok.Result.IsError || ok.Start.Before(before) || ok.Duration <= 0 {
		t.Errorf("allowed call: %+v", ok)
	}
	denied := seen[1]
	if denied.Decision.Decision != tools.Deny || denied.Decision.Source != deny.Source || denied.Decision.Reason != deny.Reason ||
		denied.Ran || !denied.Result.IsError || denied.Result.Text != `Error: command denied by policy: rule "no-rm" (destructive)` {
		t.Errorf("denied call: %+v", denied)
	}

	hidden := &events{}
	h = newHarness(t, observerPlugin("audit", []tools.Observer{hidden.observer("audit", tools.OrderRecord)}),
		gatePlugin("roles", nil, tools.Restriction{Name: "roles", Hide: func(*container.Session, string) (string, bool) { return `role "reader"`, true }}))
	h.call(t, `{"command":1}`) // refused before validation: observed as the restriction's deny
	if s := hidden.list(); len(s) != 1 || s[0].Decision.Decision != tools.Deny || s[0].Decision.Source != `role "reader"` || s[0].Ran || s[0].Args["command"] != float64(1) {
		t.Fatalf("hidden call: %+v", s)
	}
}

// A gate's replacement is what observers see as the arguments; an ask's approval
// outcome, and one a tool notes itself, are the event's Approval.
func TestObserverSeesReplacementsAndApprovals(t *testing.T) {
	rec := &events{}
	rewrite := tools.Gate{Name: "hook", Order: tools.OrderRewrite, Check: func(_ context.Context, _ string, call tools.Call) tools.Verdict {
		if call.Args["command"] == "git push" {
			return tools.Verdict{Decision: tools.Ask, Source: `hook "confirm"`, Args: map[string]any{"command": "git push --dry-run", "description": "d"}}
		}
		return tools.Verdict{}
	}}
	h := newHarness(t, approval.Plugin, observerPlugin("audit", []tools.Observer{rec.observer("audit", tools.OrderRecord)}, rewrite))
	session := &container.Session{ID: "s", Prompter: &sessionPrompter{answer: container.Accepted}}
	if res := h.registry(t).Call(context.Background(), "bash", json.RawMessage(`{"command":"git push","description":"d"}`), session); res.Text != "ran git push --dry-run" {
		t.Fatal(res.Text)
	}
	s := rec.list()
	if len(s) != 1 || s[0].Args["command"] != "git push --dry-run" || s[0].Decision.Decision != tools.Ask || s[0].Decision.Source != `hook "confirm"` ||
		s[0].Approval != approval.AllowedOnce || s[0].Session != session || !s[0].Ran {
		t.Fatalf("%+v", s)
	}

	// A tool's own approval (a sandbox escalation) is noted through its context.
	noted := &events{}
	tool := container.Define(container.Declaration[container.NoConfig]{
		Name: "escalating", Inject: container.Keys{tools.Service},
		Apply: func(a *container.Activation, _ container.NoConfig) error {
			reg, _ := container.Injected(a, tools.Service)
			if err := reg.Observe(a, noted.observer("audit", tools.OrderRecord)); err != nil {
				return err
			}
			return reg.Register(a, tools.Tool{Name: "escalate", Execute: func(ctx context.Context, _ tools.Call) (tools.Result, error) {
				tools.NoteApproval(ctx, approval.Rejected)
				return tools.Errorf("the user rejected escalating this command"), nil
			}})
		},
	})
	h = newHarness(t, tool)
	h.registry(t).Call(context.Background(), "escalate", nil, nil)
	if s := noted.list(); len(s) != 1 || s[0].Approval != approval.Rejected || s[0].Decision.Decision != tools.Allow || !s[0].Ran {
		t.Fatalf("%+v", s)
	}
	tools.NoteApproval(context.Background(), approval.Rejected) // no call: nothing to note, no panic
}

// Observers run in order (amending before recording), see what earlier ones appended,
// belong to their activation, only see the tools they name, and a panic is logged while
// the result stands.
func TestObserversOrderOwnershipAndPanics(t *testing.T) {
	rec := &events{}
	amend := tools.Observer{Name: "post-hook", Order: tools.OrderAmend, Observe: func(_ context.Context, ev *tools.Event) {
		ev.Result.Text += "\n[hook \"fmt\": formatted]"
	}}
	fragile := tools.Observer{Name: "fragile", Order: tools.OrderRecord, Observe: func(context.Context, *tools.Event) { panic("disk on fire") }}
	other := tools.Observer{Name: "other", Tools: []string{"job_kill"}, Observe: func(context.Context, *tools.Event) { t.Error("observed a tool it does not name") }}
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
	h := newHarnessLogging(t, log, observerPlugin("audit", []tools.Observer{rec.observer("audit", tools.OrderRecord), fragile, amend, other}))
	res := h.call(t, lsArgs)
	if res.Text != "ran ls\n[hook \"fmt\": formatted]" {
		t.Fatalf("%q", res.Text)
	}
	if s := rec.list(); len(s) != 1 || s[0].Result.Text != res.Text {
		t.Fatalf("the recorder ran before the amending observer: %+v", s)
	}
	mu.Lock()
	if !strings.Contains(logs.String(), "a tool call observer panicked") || !strings.Contains(logs.String(), "disk on fire") {
		t.Errorf("log: %s", logs.String())
	}
	mu.Unlock()
	if err := h.rt.Unmount("audit"); err != nil {
		t.Fatal(err)
	}
	if res := h.call(t, lsArgs); res.Text != "ran ls" || len(rec.list()) != 1 {
		t.Fatalf("after the observers' row left: %q, %d events", res.Text, len(rec.list()))
	}
	if err := h.registry(t).Observe(scope{}, tools.Observer{Name: "x"}); err == nil {
		t.Fatal("an observer without Observe was added")
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A command run a result reports reaches observers through RanCommand.
func TestCommandRunOf(t *testing.T) {
	code := 3
	res := tools.Result{Value: ran{tools.CommandRun{Executor: "bash-local", ExitCode: &code, StdoutBytes: 5}}}
	if r, ok := tools.CommandRunOf(&res); !ok || r.Executor != "bash-local" || *r.ExitCode != 3 || r.StdoutBytes != 5 {
		t.Fatalf("%+v %v", r, ok)
	}
	if _, ok := tools.CommandRunOf(&tools.Result{Value: map[string]any{}}); ok {
		t.Fatal("a plain value reported a command run")
	}
	if _, ok := tools.CommandRunOf(nil); ok {
		t.Fatal("nil reported a command run")
	}
}

type ran struct{ run tools.CommandRun }

func (r ran) CommandRun() tools.CommandRun { return r.run }

// A trace context travels in the call's context; an empty one is not stored.
func TestTraceContext(t *testing.T) {
	ctx := tools.WithTraceContext(context.Background(), tools.TraceContext{})
	if _, ok := tools.TraceContextOf(ctx); ok {
		t.Fatal("an empty trace context was stored")
	}
	tc := tools.TraceContext{Parent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", State: "k=v"}
	if got, ok := tools.TraceContextOf(tools.WithTraceContext(ctx, tc)); !ok || got != tc {
		t.Fatalf("%+v %v", got, ok)
	}
}

// Without observers a call costs what it did before observers existed; with one, the
// event is the extra.
func BenchmarkCallObservers(b *testing.B) {
	for _, n := range []int{0, 1} {
		b.Run(map[int]string{0: "none", 1: "one"}[n], func(b *testing.B) {
			var obs []tools.Observer
			if n > 0 {
				obs = append(obs, tools.Observer{Name: "o", Observe: func(context.Context, *tools.Event) {}})
			}
			reg := tools.NewRegistry()
			_ = reg.Register(scope{}, tools.Tool{Name: "t", Execute: func(context.Context, tools.Call) (tools.Result, error) {
				return tools.Result{Text: "ok"}, nil
			}})
			for _, o := range obs {
				_ = reg.Observe(scope{}, o)
			}
			args := map[string]any{}
			b.ReportAllocs()
			for b.Loop() {
				reg.CallMap(context.Background(), "t", args, nil)
			}
		})
	}
}

// deferring is a prompter that puts the question to the client in the result, as the
// stateless lane's does.
type deferring struct{}

func (deferring) Confirm(ctx context.Context, _ string) (container.Answer, error) {
	tools.NoteDeferred(ctx)
	return "", approval.ErrDeferred
}

// A question deferred to the client is told to observers as such, not as the user's
// cancel.
func TestObserverSeesDeferredApprovals(t *testing.T) {
	rec := &events{}
	ask := answering("ask", 1, tools.Verdict{Decision: tools.Ask, Source: `rule "push"`})
	h := newHarness(t, approval.Plugin, observerPlugin("audit", []tools.Observer{rec.observer("audit", tools.OrderRecord)}, ask))
	res := h.registry(t).Call(context.Background(), "bash", json.RawMessage(lsArgs), &container.Session{ID: "s", Prompter: deferring{}})
	if res.Text != `Error: approval of this command was cancelled (rule "push")` {
		t.Fatal(res.Text)
	}
	if s := rec.list(); len(s) != 1 || !s[0].Deferred || s[0].Approval != approval.Cancelled || s[0].Ran {
		t.Fatalf("%+v", s)
	}
	tools.NoteDeferred(context.Background()) // no call: nothing to note, no panic
}
