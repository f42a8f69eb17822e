package mcpserve

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/approval"
)

// elicitPrompter asks a session-lane client through MCP form elicitation: a yes/no
// question with an empty schema, and one that offers "for the session" with the
// forSession boolean (approval.ForSessionSchema).
type elicitPrompter struct{ ss *mcp.ServerSession }

var _ container.SessionPrompter = elicitPrompter{}

func (p elicitPrompter) Confirm(ctx context.Context, message string) (container.Answer, error) {
	res, err := p.ss.Elicit(ctx, &mcp.ElicitParams{
		Mode:            "form",
		Message:         message,
		RequestedSchema: emptySchema(),
	})
	if err != nil {
		return "", err
	}
	return answerOf(res)
}

// ConfirmForSession asks with the forSession form: accept with it ticked allows for the
// rest of the session, accept without it once.
func (p elicitPrompter) ConfirmForSession(ctx context.Context, message string) (container.Answer, error) {
	res, err := p.ss.Elicit(ctx, &mcp.ElicitParams{
		Mode:            "form",
		Message:         message,
		RequestedSchema: approval.ForSessionSchema(),
	})
	if err != nil {
		return "", err
	}
	return approval.FormAnswer(res.Action, res.Content)
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
