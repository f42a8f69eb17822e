package mcpserve

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/approval"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// approvalInputKey names dsh's approval question in input_required results.
const approvalInputKey = "approval"

// requestStateTTL bounds how long a client may take to answer an approval question.
const requestStateTTL = 15 * time.Minute

// inputAsker is the Prompter of one stateless-revision tools/call: the revision has no
// server-to-client requests, so a question ends the call with an input_required result
// (an elicitation with the question and an empty schema) and the client retries the
// call with the user's answer and the signed request state, which binds the answer to
// this principal, tool and arguments. The first question of the retry gets that answer.
type inputAsker struct {
	state string // for the input_required result: signs the call

	mu       sync.Mutex
	answer   *mcp.ElicitResult // from the retry; used once
	question string            // asked and not answered: the call needs input
}

// newAsker prepares the prompter of req, checking the answer a retry carries. A retry
// whose request state is not one dsh signed for this very call is an error.
func (s *Server) newAsker(sc *scope, session *container.Session, req *mcp.CallToolRequest) (*inputAsker, error) {
	key := s.stateKey
	if sc.principal != nil {
		key = sc.principal.stateKey
	}
	digest, err := callDigest(session.ID, req.Params.Name, req.Params.Arguments)
	if err != nil {
		return nil, err
	}
	a := &inputAsker{state: signState(key, digest, time.Now().Add(requestStateTTL))}
	if req.Params.RequestState == "" && len(req.Params.InputResponses) == 0 {
		return a, nil
	}
	now := time.Now()
	if !verifyState(key, digest, req.Params.RequestState, now) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: "requestState is invalid or expired for this call: call the tool again without inputResponses"}
	}
	if !s.usedStates.take(req.Params.RequestState, now) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "this approval was already used"}
	}
	if r, ok := req.Params.InputResponses[approvalInputKey].(*mcp.ElicitResult); ok {
		a.answer = r
	}
	return a, nil
}

func (a *inputAsker) Confirm(ctx context.Context, message string) (container.Answer, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.answer != nil {
		res := a.answer
		a.answer = nil
		return answerOf(res)
	}
	a.question = message
	tools.NoteDeferred(ctx) // the audit log must not read it as the user's cancel
	return "", approval.ErrDeferred
}

// inputRequired is the result that puts the pending question to the client.
func (a *inputAsker) inputRequired() *mcp.CallToolResult {
	a.mu.Lock()
	defer a.mu.Unlock()
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{approvalInputKey: &mcp.ElicitParams{
			Mode:            "form",
			Message:         a.question,
			RequestedSchema: emptySchema(),
		}},
		RequestState: a.state,
	}
}
