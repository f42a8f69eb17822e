package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/approval"
)

// The waterfall: every call of a tool that has gates goes through them after its
// arguments are validated and before Execute. Gates run in order; the strictest answer
// wins (deny > ask > allow; all pass = allow), and the first of equally strict answers
// names the source. A deny ends the waterfall at once: nothing stricter exists.
//
//	deny   Error: command denied by policy: <source> (<reason>)
//	ask    the approval service asks the session's user; allowed-once and
//	       allowed-for-session run the call, anything else refuses it:
//	         rejected     Error: the user did not allow this command (<source>)
//	         cancelled    Error: approval of this command was cancelled (<source>)
//	         unavailable  Error: this command needs approval (<source>), but no
//	                      approval channel is available
//	       (no approval service composed: unavailable, and the log says so)
//
// Every decision is logged with its source: "tool call decided" at info for ask and
// deny, at debug for allow. A tool without gates pays one slice read.

// judgement is one gate's part in one call.
type judgement struct {
	gate     *gate
	verdict  Verdict
	current  bool // answered for the call's current arguments
	replaced bool // has replaced the arguments once
}

// decide runs call through gates and returns the call to execute (its arguments may be
// replaced), or the result that refuses it. ev, when observers wait for the call,
// records the decision.
func (r *Registry) decide(ctx context.Context, t *Tool, gates []*gate, call Call, ev *Event) (Call, *Result) {
	call, js, refused := r.runGates(ctx, t, gates, call)
	if refused != nil {
		if ev != nil && len(js) == 1 {
			ev.Args, ev.Decision = call.Arguments(), js[0].verdict
		}
		return call, refused
	}
	final, asks := strictest(js)
	if ev != nil {
		ev.Args, ev.Decision = call.Arguments(), final
	}
	switch final.Decision {
	case Deny:
		r.logDecision(ctx, t.Name, call, final, "")
		res := Errorf("command denied by policy: %s%s", final.Source, reasonSuffix(final.Reason))
		return call, &res
	case Ask:
		outcome := r.ask(ctx, t.Name, call, asks)
		NoteApproval(ctx, outcome)
		r.logDecision(ctx, t.Name, call, final, outcome)
		if res := refusal(outcome, final.Source); res != nil {
			return call, res
		}
		return call, nil
	}
	r.logDecision(ctx, t.Name, call, final, "")
	return call, nil
}

// runGates asks each gate in order. When a gate replaces the arguments, they are
// validated again and every other gate's answer is for the old ones: those gates answer
// again (in order), the replacing gate's answer stands. A deny returns at once.
func (r *Registry) runGates(ctx context.Context, t *Tool, gates []*gate, call Call) (Call, []judgement, *Result) {
	js := make([]judgement, 0, len(gates))
	for _, g := range gates {
		if g.judges(t.Name) {
			js = append(js, judgement{gate: g})
		}
	}
	var raw map[string]any // the current arguments as given, once a gate replaced them
	for i := 0; i < len(js); i++ {
		j := &js[i]
		if j.current {
			continue
		}
		j.verdict, j.current = check(ctx, j.gate, t.Name, call), true
		if j.verdict.Decision == Deny {
			return call, js[i : i+1], nil
		}
		if j.verdict.Args == nil {
			continue
		}
		if raw == nil {
			raw = call.Arguments()
		}
		if reflect.DeepEqual(j.verdict.Args, raw) {
			continue
		}
		if j.replaced {
			j.verdict = Verdict{Decision: Deny, Source: j.verdict.Source, Reason: "replaced the arguments a second time"}
			return call, js[i : i+1], nil
		}
		args, extra, err := t.InputSchema.validate(j.verdict.Args)
		if err != nil {
			res := Errorf("invalid arguments from %s: %v", j.verdict.Source, err)
			j.verdict = Verdict{Decision: Deny, Source: j.verdict.Source, Reason: err.Error()}
			return call, js[i : i+1], &res
		}
		j.replaced, raw = true, j.verdict.Args
		call.Args, call.Extra = args, extra
		for k := range js {
			js[k].current = k == i
		}
		i = -1 // from the first gate again: it answered for the old arguments
	}
	return call, js, nil
}

// check runs one gate; a panic is a deny. A verdict without a source names the gate.
func check(ctx context.Context, g *gate, tool string, call Call) (v Verdict) {
	defer func() {
		if p := recover(); p != nil {
			v = Verdict{Decision: Deny, Source: fmt.Sprintf("gate %q", g.Name), Reason: fmt.Sprintf("the gate failed: %v", p)}
		}
	}()
	v = g.Check(ctx, tool, call)
	if v.Source == "" {
		v.Source = fmt.Sprintf("gate %q", g.Name)
	}
	return v
}

// strictest combines the answers: the strictest wins, the first of equals names it; all
// pass is an allow without a source. asks are every ask, in order.
func strictest(js []judgement) (final Verdict, asks []Verdict) {
	final = Verdict{Decision: Allow}
	found := false
	for _, j := range js {
		v := j.verdict
		if v.Decision == Ask {
			asks = append(asks, v)
		}
		if v.Decision == Pass || found && v.Decision <= final.Decision {
			continue
		}
		final, found = v, true
	}
	final.Args, final.Remember = nil, nil
	return final, asks
}

// ask puts the call to the approval service. "For the session" is offered when every
// gate that asked can remember it; given, each of them remembers.
func (r *Registry) ask(ctx context.Context, tool string, call Call, asks []Verdict) approval.Outcome {
	forSession := call.Session != nil
	for _, v := range asks {
		forSession = forSession && v.Remember != nil
	}
	var approver approval.Approver
	ok := false
	if r.services != nil {
		approver, ok = container.Lookup(r.services, approval.Service)
	}
	if !ok {
		r.log.Info("a gate asks for approval, but no approval service is composed: unavailable",
			"tool", tool, "session", sessionID(call.Session), "source", asks[0].Source)
		return approval.Unavailable
	}
	outcome := approver.Request(ctx, approval.Request{
		Session:    call.Session,
		Tool:       tool,
		Command:    subject(call),
		Source:     asks[0].Source,
		Reason:     asks[0].Reason,
		ForSession: forSession,
	})
	if outcome == approval.AllowedForSession && forSession {
		for _, v := range asks {
			v.Remember()
		}
	}
	return outcome
}

// refusal is the result for an approval outcome that does not let the call run, nil for
// one that does.
func refusal(outcome approval.Outcome, source string) *Result {
	var res Result
	switch outcome {
	case approval.AllowedOnce, approval.AllowedForSession:
		return nil
	case approval.Rejected:
		res = Errorf("the user did not allow this command (%s)", source)
	case approval.Cancelled:
		res = Errorf("approval of this command was cancelled (%s)", source)
	case approval.Unavailable:
		res = Errorf("this command needs approval (%s), but no approval channel is available", source)
	default:
		res = Errorf("approval of this command returned an unknown outcome %q (%s); the command did not run", string(outcome), source)
	}
	return &res
}

// subject is what the user is asked to allow: the call's command, else its arguments.
func subject(call Call) string {
	if c, ok := call.Args["command"].(string); ok {
		return c
	}
	data, err := json.Marshal(call.Arguments())
	if err != nil {
		return fmt.Sprint(call.Arguments())
	}
	return string(data)
}

func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}

func sessionID(s *container.Session) string {
	if s == nil {
		return ""
	}
	return s.ID
}

// logDecision logs the waterfall's decision for a call: ask and deny at info, allow at
// debug; outcome is the approval's, for an ask.
func (r *Registry) logDecision(ctx context.Context, tool string, call Call, v Verdict, outcome approval.Outcome) {
	level := slog.LevelInfo
	if v.Decision == Allow {
		level = slog.LevelDebug
	}
	if !r.log.Enabled(ctx, level) {
		return
	}
	attrs := []any{"tool", tool, "session", sessionID(call.Session), "decision", v.Decision.String(), "source", v.Source}
	if v.Reason != "" {
		attrs = append(attrs, "reason", v.Reason)
	}
	if outcome != "" {
		attrs = append(attrs, "approval", string(outcome))
	}
	r.log.Log(ctx, level, "tool call decided", attrs...)
}
