package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dsh-dev/dsh/container"
)

// Service is the key the registry is provided under.
var Service = container.NewKey[*Registry]("tools")

// Plugin declares the tools registry.
var Plugin = container.Define(container.Declaration[container.NoConfig]{
	Name:    "tools",
	Aliases: []string{"@deepseek-ai/dsh-tools"},
	Provide: container.Keys{Service},
	Apply: func(a *container.Activation, _ container.NoConfig) error {
		reg := NewRegistry()
		// The waterfall's asks go to the approval service of the moment, and its
		// decisions are logged as this row's.
		reg.services, reg.log = a, a.Logger()
		reg.ExplainUnavailable(a.ToolUnavailable)
		return Service.Provide(a, reg)
	},
})

// Module registers Plugin in the catalog.
var Module = container.ModuleOf(Plugin)

// Tool is one model-facing tool.
type Tool struct {
	Name        string
	Description string
	// InputSchema is an object schema; the registry validates arguments against it
	// before Execute runs.
	InputSchema *Schema
	// OutputSchema, when set, is a JSON schema, encoded, that the Value of every result
	// that is not an error satisfies (MCP outputSchema; clients may validate against
	// it). It is served as it is: encoding a *jsonschema.Schema costs a server's start
	// about 0.2 ms a schema (EncodeSchema does it once; the built-in tools embed theirs).
	OutputSchema json.RawMessage
	// Execute runs the call. A returned error is an infrastructure failure; the registry
	// turns it into an IsError result.
	Execute func(ctx context.Context, call Call) (Result, error)
	// PresentCall and PresentResult, when set, describe how a UI renders the call and its
	// result. They are pure: no I/O, safe to run on replay.
	PresentCall   func(args map[string]any) Card
	PresentResult func(args map[string]any, result Result) Card
	// Shape, when set, is the tool as one session sees it: the description ("" keeps
	// Description) and input schema (nil keeps InputSchema) that session's tool list
	// shows (ToolsFor) — bash offers only the sandbox modes within a role's ceiling.
	// Calls are still validated against InputSchema: the tool refuses, with its own
	// message, what the session may not do. It is pure and cheap (every tools/list of a
	// session runs it) and returns the same pointers while nothing changed.
	Shape func(session *container.Session) (description string, schema *Schema)
}

// Call is one validated invocation.
type Call struct {
	// Args holds the declared properties that were given, validated.
	Args map[string]any
	// Extra holds keys the schema does not declare. They never reach an executor; a tool
	// may look at them (to reject a forced, disabled option).
	Extra map[string]any
	// Session is the calling harness session, or nil.
	Session *container.Session
}

// Arguments returns the call's arguments as the caller gave them: the declared ones and
// the extra keys together (what a hook is shown as the tool's input).
func (c Call) Arguments() map[string]any {
	out := make(map[string]any, len(c.Args)+len(c.Extra))
	maps.Copy(out, c.Args)
	maps.Copy(out, c.Extra)
	return out
}

// Result is what a tool call produces: Text for the model, Value for programs (MCP
// structured content), IsError for failures.
type Result struct {
	Text    string
	IsError bool
	Value   any
}

// Errorf returns a failed result with text "Error: <message>".
func Errorf(format string, args ...any) Result {
	return Result{Text: "Error: " + fmt.Sprintf(format, args...), IsError: true}
}

// Card is a UI render intent returned by the presenters.
type Card struct {
	Card        string   `json:"card"` // "terminal" or "generic"
	Title       string   `json:"title,omitempty"`
	Description string   `json:"description,omitempty"`
	Cwd         string   `json:"cwd,omitempty"`
	Kind        string   `json:"kind,omitempty"`
	RawInput    string   `json:"rawInput,omitempty"`
	Content     []string `json:"content,omitempty"`
	Output      string   `json:"output,omitempty"`
	ExitCode    *int     `json:"exitCode,omitempty"`
	Signal      string   `json:"signal,omitempty"`
}

// Registry holds the registered tools, the gates and restrictions that decide which
// session may call them, and the observers told about every call. It is safe for
// concurrent use.
type Registry struct {
	mu           sync.RWMutex
	tools        map[string]*Tool
	gates        []*gate                          // sorted by order; replaced, never changed in place
	restrictions []*Restriction                   // replaced, never changed in place
	observers    []*observer                      // sorted by order; replaced, never changed in place
	seq          int                              // gate and observer registrations so far
	unavailable  func(tool string) (string, bool) // see ExplainUnavailable

	services container.Services // where the approval service is looked up; nil: nowhere
	log      *slog.Logger
}

// NewRegistry returns an empty registry. Outside a composition (the tools plugin's own
// registry looks the approval service up in it) a gate's ask is answered unavailable.
func NewRegistry() *Registry { return &Registry{tools: map[string]*Tool{}, log: slog.Default()} }

// Register adds t for as long as scope's activation lasts. A second tool with the same
// name is an error.
func (r *Registry) Register(scope container.Scope, t Tool) error {
	if t.Name == "" || t.Execute == nil {
		return errors.New("tools: a tool needs a name and Execute")
	}
	if t.InputSchema == nil {
		t.InputSchema = &Schema{Type: "object"}
	}
	if t.InputSchema.Type != "object" {
		return fmt.Errorf("tools: tool %q: input schema must have type \"object\", got %q", t.Name, t.InputSchema.Type)
	}
	r.mu.Lock()
	if _, dup := r.tools[t.Name]; dup {
		r.mu.Unlock()
		return fmt.Errorf("tools: tool %q is already registered", t.Name)
	}
	tp := &t
	r.tools[t.Name] = tp
	r.mu.Unlock()
	scope.Defer(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.tools[t.Name] == tp {
			delete(r.tools, t.Name)
		}
	})
	return nil
}

// Tools returns the registered tools sorted by name.
func (r *Registry) Tools() []Tool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Tool, 0, len(r.tools))
	for _, t := range r.tools {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Tool returns the named tool.
func (r *Registry) Tool(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	if !ok {
		return Tool{}, false
	}
	return *t, true
}

// lookup returns the named tool with the gates, restrictions and observers of the
// moment, in one read.
func (r *Registry) lookup(name string) (t Tool, gates []*gate, restrictions []*Restriction, observers []*observer, ok bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	tp, ok := r.tools[name]
	if !ok {
		return Tool{}, nil, nil, nil, false
	}
	return *tp, r.gates, r.restrictions, r.observers, true
}

// Call validates args (a JSON object; empty means {}), puts the call through the
// session's restrictions and the tool's gates, and runs the named tool. Every outcome is
// a Result: unknown and hidden tools, bad arguments, policy refusals, aborts,
// infrastructure errors and panics become IsError results with text "Error: <message>".
func (r *Registry) Call(ctx context.Context, name string, args json.RawMessage, session *container.Session) Result {
	raw, err := DecodeArgs(args)
	if err != nil {
		return Errorf("%v", err)
	}
	return r.CallMap(ctx, name, raw, session)
}

// CallMap is Call with already-decoded arguments (JSON types: float64, string, bool,
// nil, []any, map[string]any).
func (r *Registry) CallMap(ctx context.Context, name string, raw map[string]any, session *container.Session) Result {
	if ctx.Err() != nil {
		return Errorf("tool call aborted before dispatch")
	}
	t, gates, restrictions, observers, ok := r.lookup(name)
	if !ok {
		msg, _ := r.Missing(name)
		return Errorf("%s", msg)
	}
	if len(observers) == 0 {
		return r.call(ctx, &t, gates, restrictions, raw, session, nil)
	}
	return r.observed(ctx, name, observers, session, func(ctx context.Context, ev *Event) Result {
		return r.call(ctx, &t, gates, restrictions, raw, session, ev)
	})
}

// call runs one call of t: the restrictions, validation, the waterfall, Execute. ev,
// when observers wait for the call, records what was decided.
func (r *Registry) call(ctx context.Context, t *Tool, gates []*gate, restrictions []*Restriction, raw map[string]any, session *container.Session, ev *Event) (res Result) {
	name := t.Name
	if why, hide := hidden(restrictions, session, name); hide {
		if ev != nil {
			ev.Args, ev.Decision = raw, Verdict{Decision: Deny, Source: why}
		}
		return Errorf("tool %q is not available to this session (%s)", name, why)
	}
	args, extra, err := t.InputSchema.validate(raw)
	if err != nil {
		return Errorf("%v", err)
	}
	call := Call{Args: args, Extra: extra, Session: session}
	if len(gates) > 0 {
		var refused *Result
		if call, refused = r.decide(ctx, t, gates, call, ev); refused != nil {
			return *refused
		}
		if ctx.Err() != nil {
			return Errorf("tool call aborted before dispatch")
		}
	} else if ev != nil {
		ev.Args, ev.Decision = call.Arguments(), Verdict{Decision: Allow}
	}
	extra = call.Extra
	ctx, settled := withSettlement(ctx)
	defer func() {
		if p := recover(); p != nil {
			settled.settle(true) // its caller learns of nothing it did
			res = Errorf("tool %q panicked: %v", name, p)
		}
	}()
	if ev != nil {
		ev.Ran = true
	}
	res, err = t.Execute(ctx, call)
	if ctx.Err() != nil {
		aborted := Result{Text: "Error: tool call aborted", IsError: true, Value: res.Value}
		if settled.settle(true) {
			aborted.Value = nil // it named what was undone
		}
		return aborted
	}
	settled.settle(false)
	if err != nil {
		return Errorf("%v", err)
	}
	if len(extra) > 0 && !res.IsError {
		res.Text = ignoredNotice(extra) + "\n" + res.Text
	}
	return res
}

// ignoredNotice is the line that opens the text of a successful call whose arguments
// included keys the tool's schema does not declare, so that the model learns that a
// misspelled argument had no effect: "[ignored unknown argument: timeout]", or
// "[ignored unknown arguments: a, b]" (sorted). The keys never reach the tool's work;
// error results carry no notice (their text is the error).
func ignoredNotice(extra map[string]any) string {
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) == 1 {
		return "[ignored unknown argument: " + keys[0] + "]"
	}
	return "[ignored unknown arguments: " + strings.Join(keys, ", ") + "]"
}

// DecodeArgs parses tool arguments: a JSON object, or empty/null for no arguments.
func DecodeArgs(data json.RawMessage) (map[string]any, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return map[string]any{}, nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("invalid arguments: %v", err)
	}
	if dec.More() {
		return nil, errors.New("invalid arguments: trailing data after the JSON object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("invalid arguments: expected a JSON object")
	}
	return m, nil
}

// SchemaFor is the JSON schema of a tool's typed result T (for Tool.OutputSchema, with
// EncodeSchema), derived from its Go type, so that the values the tool returns satisfy
// it by construction. It panics on a type that has no schema: a programming error,
// found where the tool is defined.
func SchemaFor[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(err)
	}
	return s
}

// EncodeSchema is s encoded for Tool.OutputSchema. It panics on a schema that does not
// encode: a programming error, found where the tool is defined.
func EncodeSchema(s *jsonschema.Schema) json.RawMessage {
	data, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return data
}
