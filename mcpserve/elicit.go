package mcpserve

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/container"
)

// elicitPrompter asks a session-lane client through MCP form elicitation with an empty
// schema.
type elicitPrompter struct{ ss *mcp.ServerSession }

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
