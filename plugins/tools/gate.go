package tools

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/dsh-dev/dsh/container"
)

// Decision is a gate's answer for one call, ordered by strictness: Pass < Allow < Ask <
// Deny. The strictest answer of the waterfall wins; when every gate passes, the call is
// allowed.
type Decision uint8

// The decisions.
const (
	// Pass: the gate has nothing to say about this call (the zero Verdict).
	Pass Decision = iota
	// Allow: the gate allows the call.
	Allow
	// Ask: the session's user must allow the call (the approval service asks).
	Ask
	// Deny: the call must not run.
	Deny
)

// String returns "pass", "allow", "ask" or "deny".
func (d Decision) String() string {
	switch d {
	case Pass:
		return "pass"
	case Allow:
		return "allow"
	case Ask:
		return "ask"
	case Deny:
		return "deny"
	}
	return fmt.Sprintf("Decision(%d)", uint8(d))
}

// Verdict is one gate's answer for one call.
type Verdict struct {
	Decision Decision
	// Source names what decided, as the denial and the approval question show it:
	// `rule "no-force-push"`, `hook "lint"`, `role "reader"`. Empty
	// means the gate itself: `gate "<name>"`.
	Source string
	// Reason says why, when there is more to say than the source (a rule's reason, a
	// hook's message).
	Reason string
	// Args, when set, replaces the call's arguments (a hook's updatedInput), as decoded
	// JSON (what Call.Args holds, extra keys included). The registry validates them
	// against the tool's input schema again; the gates that answered for the old
	// arguments answer again for the new ones, and Execute gets them. A gate replaces the
	// arguments of one call at most once: a second replacement denies the call.
	Args map[string]any
	// Remember, when set on an Ask, makes "for the rest of the session" a possible
	// answer: the registry calls it when the user gives that answer, and the gate then
	// allows what it asked about for the rest of the call's session (it forgets when the
	// session ends: its activation's OnSessionEnd). Nil: the user is asked once-or-not.
	Remember func()
}

// Gate is one check of the pre-execute waterfall: the registry runs every call, after
// argument validation and before Execute, through the gates registered for its tool.
type Gate struct {
	// Name names the gate in logs, and in the source of its own failures (`gate
	// "<name>"`): usually the row id of the plugin that registered it.
	Name string
	// Order places the gate in the waterfall: lower runs first, ties in registration
	// order. Gates that replace arguments (OrderRewrite) run before the gates that judge
	// them (OrderPolicy), so that a replacement makes nobody judge twice.
	Order int
	// Tools are the names of the tools the gate judges; none means every tool.
	Tools []string
	// Check judges one call, whose arguments are validated. It must honour ctx and be
	// safe for concurrent use; a panic is a deny (`gate "<name>"`, reason `the gate
	// failed: <panic>`).
	Check func(ctx context.Context, tool string, call Call) Verdict
}

// Orders of the built-in kinds of gates.
const (
	// OrderRewrite is the order of gates that may replace a call's arguments (hooks).
	OrderRewrite = 100
	// OrderPolicy is the order of gates that judge the arguments (rules, roles).
	OrderPolicy = 200
)

// gate is a registered Gate.
type gate struct {
	Gate
	seq int // registration order
}

func (g *gate) judges(tool string) bool {
	return len(g.Tools) == 0 || slices.Contains(g.Tools, tool)
}

// AddGate adds g to the waterfall for as long as scope's activation lasts.
func (r *Registry) AddGate(scope container.Scope, g Gate) error {
	if g.Name == "" || g.Check == nil {
		return errors.New("tools: a gate needs a name and Check")
	}
	addOrdered(r, scope, &r.gates, func(seq int) *gate { return &gate{Gate: g, seq: seq} },
		func(x *gate) (int, int) { return x.Order, x.seq })
	return nil
}

// addOrdered adds the registration made(seq) to *list, sorted by its order and then
// its registration, for as long as scope's activation lasts: the gates and the
// observers. The list is copied on write (a call in flight keeps the one it read).
func addOrdered[T any](r *Registry, scope container.Scope, list *[]*T, made func(seq int) *T, order func(*T) (order, seq int)) {
	r.mu.Lock()
	r.seq++
	x := made(r.seq)
	l := append(slices.Clone(*list), x)
	slices.SortStableFunc(l, func(a, b *T) int {
		ao, as := order(a)
		bo, bs := order(b)
		if ao != bo {
			return ao - bo
		}
		return as - bs
	})
	*list = l
	r.mu.Unlock()
	scope.Defer(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		*list = slices.DeleteFunc(slices.Clone(*list), func(y *T) bool { return y == x })
	})
}

// Restriction hides tools from sessions: a hidden tool is left out of the session's
// ToolsFor and a call to it is refused with `tool "<name>" is not available to this
// session (<why>)`, before its arguments are validated. While no restriction is
// registered, a session with a role (container.Session.Role) is refused every tool:
// `(role "<role>": no roles are active)`.
type Restriction struct {
	// Name names the restriction in logs.
	Name string
	// Hide reports whether session may not see or call tool, and why (`role "reader"`).
	// It must be cheap and safe for concurrent use; a panic hides the tool.
	Hide func(session *container.Session, tool string) (why string, hidden bool)
}

// Restrict adds rs for as long as scope's activation lasts.
func (r *Registry) Restrict(scope container.Scope, rs Restriction) error {
	if rs.Name == "" || rs.Hide == nil {
		return errors.New("tools: a restriction needs a name and Hide")
	}
	rp := &rs
	r.mu.Lock()
	r.restrictions = append(slices.Clone(r.restrictions), rp)
	r.mu.Unlock()
	scope.Defer(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.restrictions = slices.DeleteFunc(slices.Clone(r.restrictions), func(x *Restriction) bool { return x == rp })
	})
	return nil
}

// Restricted reports whether a restriction is registered: what a session sees
// (ToolsFor) may then depend on the session.
func (r *Registry) Restricted() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.restrictions) > 0
}

// hidden applies the restrictions to one tool for session. A session with a role while
// no restriction is registered (the roles row failed, or a reload is replacing it) sees
// nothing: what its role allows cannot be told.
func hidden(restrictions []*Restriction, session *container.Session, tool string) (why string, hide bool) {
	if len(restrictions) == 0 {
		if session != nil && session.Role != "" {
			return fmt.Sprintf("role %q: no roles are active", session.Role), true
		}
		return "", false
	}
	for _, rs := range restrictions {
		if why, hide = hideSafely(rs, session, tool); hide {
			return why, true
		}
	}
	return "", false
}

func hideSafely(rs *Restriction, session *container.Session, tool string) (why string, hide bool) {
	defer func() {
		if p := recover(); p != nil {
			why, hide = fmt.Sprintf("restriction %q failed: %v", rs.Name, p), true
		}
	}()
	return rs.Hide(session, tool)
}

// ToolsFor returns the tools session may see, sorted by name, each as that session sees
// it (Tool.Shape).
func (r *Registry) ToolsFor(session *container.Session) []Tool {
	r.mu.RLock()
	restrictions := r.restrictions
	r.mu.RUnlock()
	all := r.Tools()
	out := all[:0]
	for _, t := range all {
		if _, hide := hidden(restrictions, session, t.Name); hide {
			continue
		}
		if t.Shape != nil {
			d, s := t.Shape(session)
			if d != "" {
				t.Description = d
			}
			if s != nil {
				t.InputSchema = s
			}
		}
		out = append(out, t)
	}
	return out
}
