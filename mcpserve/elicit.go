package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/approval"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// DefaultApprovalTimeout is Options.ApprovalTimeout when it is 0.
const DefaultApprovalTimeout = 10 * time.Minute

// elicitPrompter asks a session-lane client through MCP form elicitation: a yes/no
// question with an empty schema, and one that offers "for the session" with the
// forSession boolean (approval.ForSessionSchema). A question unanswered for timeout is
// withdrawn (the SDK tells the client it is cancelled) and counts as the user's
// cancel. A JSON-RPC error for an answer is recorded in the call's approvalFailure, so
// the call reports it as such.
type elicitPrompter struct {
	ss      *mcp.ServerSession
	timeout time.Duration
	log     *slog.Logger
}

var _ container.SessionPrompter = elicitPrompter{}

func (p elicitPrompter) Confirm(ctx context.Context, message string) (container.Answer, error) {
	res, err := p.ask(ctx, message, emptySchema())
	switch {
	case err != nil:
		return "", err
	case res == nil:
		return container.Cancelled, nil
	}
	return answerOf(res)
}

// ask elicits an answer to message with schema. A question left unanswered for
// p.timeout is withdrawn: no result and no error (the user's cancel). A JSON-RPC error
// is recorded in the call's approvalFailure.
func (p elicitPrompter) ask(ctx context.Context, message string, schema any) (*mcp.ElicitResult, error) {
	asking, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	res, err := p.ss.Elicit(asking, &mcp.ElicitParams{
		Mode:            "form",
		Message:         message,
		RequestedSchema: schema,
	})
	if err != nil {
		if ctx.Err() == nil && asking.Err() != nil {
			p.log.Info("approval question unanswered: cancelled", "timeout", p.timeout.String())
			return nil, nil
		}
		var rpcErr *jsonrpc.Error
		if f, ok := ctx.Value(approvalFailureKey{}).(*approvalFailure); ok && errors.As(err, &rpcErr) {
			f.set(rpcErr)
		}
		return nil, err
	}
	return res, nil
}

// ConfirmForSession asks with the forSession form: accept with it ticked allows for the
// rest of the session, accept without it once.
func (p elicitPrompter) ConfirmForSession(ctx context.Context, message string) (container.Answer, error) {
	res, err := p.ask(ctx, message, approval.ForSessionSchema())
	switch {
	case err != nil:
		return "", err
	case res == nil:
		return container.Cancelled, nil
	}
	return approval.FormAnswer(res.Action, res.Content)
}

// approvalFailure is the JSON-RPC error a client answered a call's approval question
// with. The approval service knows four outcomes, and words a failed channel as no
// channel at all; the call's result says what happened instead.
type approvalFailure struct {
	mu  sync.Mutex
	err *jsonrpc.Error
}

type approvalFailureKey struct{}

func (f *approvalFailure) set(err *jsonrpc.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// result is the failed call's result, naming the client's error.
func (f *approvalFailure) result(res tools.Result) tools.Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil || !res.IsError {
		return res
	}
	res.Text = fmt.Sprintf("Error: approval failed: the client answered the approval request with JSON-RPC error %d (%s); nothing was approved", f.err.Code, f.err.Message)
	return res
}

// emptySchema is the schema of a yes/no question: the answer is the action alone.
func emptySchema() map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{}}
}

// answerOf maps an elicitation's action to the approval answer.
func answerOf(res *mcp.ElicitResult) (container.Answer, error) {
	switch res.Action {
	case "accept":
		return container.Accepted, nil
	case "decline":
		return container.Declined, nil
	case "cancel":
		return container.Cancelled, nil
	}
	return "", errors.New("elicitation: unknown action " + res.Action)
}
