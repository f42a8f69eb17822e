package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/approval"
)

// rounds drives one stateless-lane call through its retries, as a client does: each
// retry carries the last result's request state and the answers to its questions only.
type rounds struct {
	t       *testing.T
	s       *Server
	session *container.Session
	last    *mcp.CallToolResult
}

// retry starts the next round with answers (key → the client's reply) for the last
// result, or the first round when answers is nil.
func (r *rounds) retry(answers map[string]*mcp.ElicitResult) (*inputAsker, error) {
	r.t.Helper()
	params := &mcp.CallToolParamsRaw{Name: "bash", Arguments: json.RawMessage(`{"command":"git push","description":"Push"}`)}
	if answers != nil {
		params.RequestState = r.last.RequestState
		params.InputResponses = mcp.InputResponseMap{}
		for k, v := range answers {
			params.InputResponses[k] = v
		}
	}
	return r.s.newAsker(&scope{}, r.session, &mcp.CallToolRequest{Params: params})
}

// ends finishes a round whose call needs input, returning the keys it asks.
func (r *rounds) ends(a *inputAsker) []string {
	r.t.Helper()
	if a.question == "" {
		r.t.Fatal("the round asked nothing")
	}
	r.last = a.inputRequired()
	var keys []string
	for k := range r.last.InputRequests {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func mustAnswer(t *testing.T, got container.Answer, err error, want container.Answer) {
	t.Helper()
	if err != nil || got != want {
		t.Fatalf("answer %q, %v; want %q", got, err, want)
	}
}

// deferred checks that a question was deferred to the client: deferred(t)(a.Confirm(…)).
func deferred(t *testing.T) func(container.Answer, error) {
	return func(got container.Answer, err error) {
		t.Helper()
		if !errors.Is(err, approval.ErrDeferred) {
			t.Fatalf("not deferred: %q, %v", got, err)
		}
	}
}

// A call that asks twice (a rule's ask offering "for the session", then a sandbox
// escalation) gets each question its own key and answer across the retries, instead of
// the first question taking the only answer every round; what an earlier round answered
// travels in the signed request state; a reply for a question the result did not put is
// ignored; each state is accepted once.
func TestInputAskerAsksEachQuestionOnce(t *testing.T) {
	ctx := context.Background()
	r := &rounds{t: t, s: &Server{stateKey: randomKey()}, session: &container.Session{ID: "s1"}}
	accept := &mcp.ElicitResult{Action: "accept"}
	forSession := &mcp.ElicitResult{Action: "accept", Content: map[string]any{approval.ForSessionProperty: true}}

	a, err := r.retry(nil)
	if err != nil {
		t.Fatal(err)
	}
	deferred(t)(a.ConfirmForSession(ctx, "rule asks"))
	if keys := r.ends(a); !slices.Equal(keys, []string{"approval"}) {
		t.Fatalf("round 1 asks %v", keys)
	}
	schema, _ := json.Marshal(r.last.InputRequests["approval"].(*mcp.ElicitParams).RequestedSchema)
	want, _ := json.Marshal(approval.ForSessionSchema())
	if string(schema) != string(want) {
		t.Errorf("the for-session question's schema %s, want %s", schema, want)
	}

	// Round 2: the rule's question is answered; the escalation is asked, and a reply to
	// it sent ahead of the question does not count.
	if a, err = r.retry(map[string]*mcp.ElicitResult{"approval": forSession, "approval-2": accept}); err != nil {
		t.Fatal(err)
	}
	got, err := a.ConfirmForSession(ctx, "rule asks")
	mustAnswer(t, got, err, container.AcceptedForSession)
	deferred(t)(a.Confirm(ctx, "escalate"))
	if keys := r.ends(a); !slices.Equal(keys, []string{"approval-2"}) {
		t.Fatalf("round 2 asks %v", keys)
	}
	schema, _ = json.Marshal(r.last.InputRequests["approval-2"].(*mcp.ElicitParams).RequestedSchema)
	if string(schema) != `{"properties":{},"type":"object"}` {
		t.Errorf("the once question's schema %s", schema)
	}
	round2 := r.last

	// Round 3: both questions have their answers; nothing more is asked.
	if a, err = r.retry(map[string]*mcp.ElicitResult{"approval-2": accept}); err != nil {
		t.Fatal(err)
	}
	got, err = a.ConfirmForSession(ctx, "rule asks")
	mustAnswer(t, got, err, container.AcceptedForSession)
	got, err = a.Confirm(ctx, "escalate")
	mustAnswer(t, got, err, container.Accepted)
	if a.question != "" {
		t.Errorf("round 3 still needs input: %q", a.question)
	}

	// The same retry again is refused.
	r.last = round2
	var rpcErr *jsonrpc.Error
	if _, err = r.retry(map[string]*mcp.ElicitResult{"approval-2": accept}); !errors.As(err, &rpcErr) || rpcErr.Message != "this approval was already used" {
		t.Errorf("replay: %v", err)
	}
}

// An answer goes only to the question it was given for: when the rule no longer asks
// (it remembered "for the session"), the escalation still gets its own answer; when a
// question's text changed, it is asked again.
func TestInputAskerAnswersByQuestion(t *testing.T) {
	ctx := context.Background()
	r := &rounds{t: t, s: &Server{stateKey: randomKey()}, session: &container.Session{ID: "s1"}}
	a, _ := r.retry(nil)
	deferred(t)(a.ConfirmForSession(ctx, "rule asks"))
	r.ends(a)
	a, err := r.retry(map[string]*mcp.ElicitResult{"approval": {Action: "accept", Content: map[string]any{"forSession": true}}})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = a.ConfirmForSession(ctx, "rule asks")
	deferred(t)(a.Confirm(ctx, "escalate"))
	r.ends(a)

	a, err = r.retry(map[string]*mcp.ElicitResult{"approval-2": {Action: "decline"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.Confirm(ctx, "escalate") // the rule remembered: it does not ask
	mustAnswer(t, got, err, container.Declined)

	// A question whose text changed since it was answered is asked again.
	r2 := &rounds{t: t, s: r.s, session: r.session}
	a, _ = r2.retry(nil)
	deferred(t)(a.Confirm(ctx, "escalate to workspace-write"))
	r2.ends(a)
	a, err = r2.retry(map[string]*mcp.ElicitResult{"approval": {Action: "accept"}})
	if err != nil {
		t.Fatal(err)
	}
	deferred(t)(a.Confirm(ctx, "escalate to danger-full-access"))
	if keys := r2.ends(a); !slices.Equal(keys, []string{"approval"}) || !strings.Contains(r2.last.InputRequests["approval"].(*mcp.ElicitParams).Message, "danger") {
		t.Errorf("the changed question: %v", keys)
	}
}
