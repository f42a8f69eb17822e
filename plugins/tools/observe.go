package tools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/approval"
)

// Observer is told about every call of the tools it observes once the call has ended:
// what was called, what the waterfall decided and who approved it, the result and its
// timing. The audit log, traces and PostToolUse hooks are observers. Observers see
// every call of a registered tool whose arguments validated, and every call a
// restriction refused; not calls of unknown tools, with invalid arguments, or aborted
// before the tool was even looked up.
type Observer struct {
	// Name names the observer in logs: usually the row id of the plugin that added it.
	Name string
	// Order places the observer: lower runs first, ties in registration order.
	// Observers that change the result's text (OrderAmend) run before those that
	// record it (OrderRecord).
	Order int
	// Tools are the names of the tools observed; none means every tool.
	Tools []string
	// Observe runs once per call, after the tool returned and before the caller gets
	// the result, on the call's goroutine: it delays the call by as long as it takes,
	// so one that records must not block (queue the record). It may change
	// ev.Result.Text (append to it); everything else in ev is read-only. It must be
	// safe for concurrent use; a panic is logged and the call's result stands.
	Observe func(ctx context.Context, ev *Event)
}

// Orders of the built-in kinds of observers.
const (
	// OrderAmend is the order of observers that may change a result's text (hooks).
	OrderAmend = 100
	// OrderRecord is the order of observers that record calls (the audit log, traces).
	OrderRecord = 200
)

// Event is one call as observers see it.
type Event struct {
	// Tool is the tool's name; Session the calling session, or nil.
	Tool    string
	Session *container.Session
	// Args are the arguments as given (declared and extra keys): after a gate replaced
	// them, the replacement; for a call a restriction refused, as the caller sent them.
	Args map[string]any
	// Decision is the waterfall's final answer: Allow (also when no gate judges the
	// tool: no source then), Ask (then Approval says what the user answered) or Deny,
	// with its source and reason. A call a restriction refused is a Deny whose source
	// is the restriction's why (`role "reader"`).
	Decision Verdict
	// Approval is the outcome of the last approval the call asked for — the
	// waterfall's ask, or a tool's own (a sandbox escalation, NoteApproval); "" when
	// nobody was asked.
	Approval approval.Outcome
	// Deferred is true when an approval question of the call went to the client in the
	// call's result instead (the stateless lane's input_required, NoteDeferred): its
	// answer comes with the client's retry, a call of its own. Approval then says what
	// the approval service answered meanwhile (cancelled).
	Deferred bool
	// Ran is true when the tool's Execute was called: the call was neither refused nor
	// aborted before it.
	Ran bool
	// Result is the call's result, as the caller gets it.
	Result *Result
	// Start is when the registry began the call; Duration how long the call took up
	// to the first observer (the waterfall, approvals and the tool's work).
	Start    time.Time
	Duration time.Duration
}

// CommandRun is what a tool that ran a command reports of that run, beyond the text
// of its result: what observers record (exit, limits, output sizes, spill files) and
// when it ran (a trace's command span).
type CommandRun struct {
	// Executor names the executor that ran it ("bash-local", "bash-sandbox").
	Executor string
	// SandboxMode is the mode a confining executor ran it in; "" otherwise.
	SandboxMode string
	// ExitCode is nil when a signal ended the command; Signal names that signal.
	ExitCode *int
	Signal   string
	// TimedOut: the command's timeout passed and it was killed.
	TimedOut bool
	// Limit names the resource limit the command hit ("memory", "processes", …), or "".
	Limit string
	// StdoutBytes and StderrBytes are the lengths of the whole streams.
	StdoutBytes, StderrBytes int64
	// Spill are the files holding complete streams (none when everything fit).
	Spill []string
	// Start and End are when the command was started and when its result was known.
	Start, End time.Time
}

// RanCommand is implemented by a Result.Value that ran a command (the bash tool's
// foreground value), so that observers learn how the command ended without knowing
// the tool's types.
type RanCommand interface {
	CommandRun() CommandRun
}

// CommandRunOf returns the command run res reports, if it reports one.
func CommandRunOf(res *Result) (CommandRun, bool) {
	if res == nil {
		return CommandRun{}, false
	}
	if rc, ok := res.Value.(RanCommand); ok {
		return rc.CommandRun(), true
	}
	return CommandRun{}, false
}

// observer is a registered Observer.
type observer struct {
	Observer
	seq int
}

func (o *observer) observes(tool string) bool {
	return len(o.Tools) == 0 || slices.Contains(o.Tools, tool)
}

// Observe adds o for as long as scope's activation lasts.
func (r *Registry) Observe(scope container.Scope, o Observer) error {
	if o.Name == "" || o.Observe == nil {
		return errors.New("tools: an observer needs a name and Observe")
	}
	addOrdered(r, scope, &r.observers, func(seq int) *observer { return &observer{Observer: o, seq: seq} },
		func(x *observer) (int, int) { return x.Order, x.seq })
	return nil
}

// eventKey carries a call's Event in its context while observers wait for it.
type eventKey struct{}

// NoteApproval records, for the call whose context ctx is, the outcome of an approval
// a tool asked for itself (a sandbox escalation): observers see it as Event.Approval.
// It must be called before the tool's Execute returns (on the call's goroutine, or
// one the tool waits for). Without observers it does nothing.
func NoteApproval(ctx context.Context, outcome approval.Outcome) {
	if ev, ok := ctx.Value(eventKey{}).(*Event); ok {
		ev.Approval = outcome
	}
}

// NoteDeferred records, for the call whose context ctx is, that its approval question
// was deferred to the client (a prompter that returned approval.ErrDeferred):
// observers see Event.Deferred. Without observers it does nothing.
func NoteDeferred(ctx context.Context) {
	if ev, ok := ctx.Value(eventKey{}).(*Event); ok {
		ev.Deferred = true
	}
}

// observed runs a call for observers: it records the event of the call that run
// makes, then tells every observer of the tool, in order.
func (r *Registry) observed(ctx context.Context, name string, observers []*observer, session *container.Session, run func(context.Context, *Event) Result) Result {
	ev := &Event{Tool: name, Session: session, Start: time.Now()}
	res := run(context.WithValue(ctx, eventKey{}, ev), ev)
	ev.Duration = time.Since(ev.Start)
	if ev.Args == nil {
		return res // never validated: not observed
	}
	ev.Result = &res
	for _, o := range observers {
		if o.observes(name) {
			r.notify(ctx, o, ev)
		}
	}
	return res
}

// notify runs one observer; a panic is logged.
func (r *Registry) notify(ctx context.Context, o *observer, ev *Event) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("a tool call observer panicked", "observer", o.Name, "tool", ev.Tool, "panic", fmt.Sprint(p))
		}
	}()
	o.Observe(ctx, ev)
}
