package mcpserve

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/approval"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// approvalInputKey names dsh's first approval question of a call in input_required
// results; later ones are "approval-2", "approval-3", ….
const approvalInputKey = "approval"

// requestStateTTL bounds how long a client may take to answer an approval question.
const requestStateTTL = 15 * time.Minute

// inputAsker is the Prompter of one stateless-revision tools/call: the revision has no
// server-to-client requests, so a question ends the call with an input_required result
// (a form elicitation: an empty schema, or the forSession boolean when "for the
// session" is offered) and the client retries the call with the user's answer and the
// signed request state, which binds the answer to this principal, tool and arguments.
//
// A call may ask more than once (a rule's ask, then a sandbox escalation), and a retry
// runs the call from the start, asking again; the client's retry carries only the
// answers to the last result's questions. So each question has its own key, and the
// request state carries, signed, the questions its result puts (by a digest of their
// text) and the answers of the earlier rounds: a question gets the answer given to that
// very question, in this round or an earlier one, and only a question the result put
// can be answered.
type inputAsker struct {
	key    []byte // signs the request state
	digest []byte // the call's (callDigest)

	mu      sync.Mutex
	given   []givenAnswer // the answers this call has, for the questions they were given to
	pending []question    // asked and not answered: the call needs input
	// question is the last pending question's text ("": the call needs no input).
	question string
}

// question is one question put in an input_required result.
type question struct {
	key, digest, message string
	forSession           bool
}

// givenAnswer is the answer to the question whose digest it names. err is a reply this
// server cannot read (an unknown action); it is never signed into a state.
type givenAnswer struct {
	key, digest string
	answer      container.Answer
	err         error
	used        bool // by a question of this round
}

// newAsker prepares the prompter of req, reading the answers a retry carries. A retry
// whose request state is not one dsh signed for this very call, or was used before, is
// an error.
func (s *Server) newAsker(sc *scope, session *container.Session, req *mcp.CallToolRequest) (*inputAsker, error) {
	key := s.stateKey
	if sc.principal != nil {
		key = sc.principal.stateKey
	}
	digest, err := callDigest(session.ID, req.Params.Name, req.Params.Arguments)
	if err != nil {
		return nil, err
	}
	a := &inputAsker{key: key, digest: digest}
	if req.Params.RequestState == "" && len(req.Params.InputResponses) == 0 {
		return a, nil
	}
	now := time.Now()
	body, ok := verifyState(key, digest, req.Params.RequestState, now)
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: "requestState is invalid or expired for this call: call the tool again without inputResponses"}
	}
	if !s.usedStates.take(req.Params.RequestState, now) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "this approval was already used"}
	}
	for _, g := range body.Given {
		a.given = append(a.given, givenAnswer{key: g.Key, digest: g.Question, answer: g.Answer})
	}
	for _, q := range body.Asked {
		if r, ok := req.Params.InputResponses[q.Key].(*mcp.ElicitResult); ok {
			answer, err := approval.FormAnswer(r.Action, r.Content)
			a.given = append(a.given, givenAnswer{key: q.Key, digest: q.Question, answer: answer, err: err})
		}
	}
	return a, nil
}

// Confirm answers a once-or-not question from the answers the call has, else defers it.
func (a *inputAsker) Confirm(ctx context.Context, message string) (container.Answer, error) {
	answer, err := a.ask(ctx, message, false)
	if answer == container.AcceptedForSession {
		answer = container.Accepted // not offered: the user agreed to this once
	}
	return answer, err
}

// ConfirmForSession answers a question offering "for the session" from the answers the
// call has, else defers it.
func (a *inputAsker) ConfirmForSession(ctx context.Context, message string) (container.Answer, error) {
	return a.ask(ctx, message, true)
}

var _ container.SessionPrompter = (*inputAsker)(nil)

// ask returns the answer given to this question, or records it as pending and defers.
func (a *inputAsker) ask(ctx context.Context, message string, forSession bool) (container.Answer, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	digest := questionDigest(message, forSession)
	for i := range a.given {
		if g := &a.given[i]; !g.used && g.digest == digest {
			g.used = true
			return g.answer, g.err
		}
	}
	a.pending = append(a.pending, question{key: a.freeKey(), digest: digest, message: message, forSession: forSession})
	a.question = message
	tools.NoteDeferred(ctx) // the audit log must not read it as the user's cancel
	return "", approval.ErrDeferred
}

// freeKey is the first of "approval", "approval-2", … that no answer this round used and
// no pending question has (an answer no question matched is dropped: its key is free).
func (a *inputAsker) freeKey() string {
	taken := map[string]bool{}
	for _, g := range a.given {
		taken[g.key] = taken[g.key] || g.used
	}
	for _, q := range a.pending {
		taken[q.key] = true
	}
	key := approvalInputKey
	for n := 2; taken[key]; n++ {
		key = approvalInputKey + "-" + strconv.Itoa(n)
	}
	return key
}

// questionDigest identifies a question by its text and its form.
func questionDigest(message string, forSession bool) string {
	form := "once\x00"
	if forSession {
		form = "for-session\x00"
	}
	sum := sha256.Sum256([]byte(form + message))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// inputRequired is the result that puts the pending questions to the client. Its request
// state signs them and the answers this round used (the earlier questions' answers,
// which the retry does not repeat).
func (a *inputAsker) inputRequired() *mcp.CallToolResult {
	a.mu.Lock()
	defer a.mu.Unlock()
	body := stateBody{Nonce: base64.RawURLEncoding.EncodeToString(randomKey()[:12])}
	for _, g := range a.given {
		if g.used && g.err == nil {
			body.Given = append(body.Given, stateEntry{Key: g.key, Question: g.digest, Answer: g.answer})
		}
	}
	requests := mcp.InputRequestMap{}
	for _, q := range a.pending {
		body.Asked = append(body.Asked, stateEntry{Key: q.key, Question: q.digest})
		schema := emptySchema()
		if q.forSession {
			schema = approval.ForSessionSchema()
		}
		requests[q.key] = &mcp.ElicitParams{Mode: "form", Message: q.message, RequestedSchema: schema}
	}
	return &mcp.CallToolResult{
		InputRequests: requests,
		RequestState:  signState(a.key, a.digest, time.Now().Add(requestStateTTL), body),
	}
}
