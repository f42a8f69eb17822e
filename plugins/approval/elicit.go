package approval

import (
	"fmt"

	"github.com/dsh-dev/dsh/container"
)

// A channel that shows a form (an MCP form elicitation, a stateless-lane
// input_required) offers "for the session" as one boolean of the form: the user accepts
// with it ticked to allow for the rest of the session, without it to allow once.

// ForSessionProperty names the form's boolean.
const ForSessionProperty = "forSession"

// ForSessionSchema is the requested schema of a question that offers "for the session"
// (a container.SessionPrompter's ConfirmForSession): one boolean property.
func ForSessionSchema() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			ForSessionProperty: map[string]any{
				"type":    "boolean",
				"title":   "Allow this for the rest of the session",
				"default": false,
			},
		},
	}
}

// FormAnswer reads a form's reply — its action ("accept", "decline", "cancel") and
// content — as a Prompter's answer: accept with forSession true is AcceptedForSession,
// any other accept Accepted. An unknown action is an error.
func FormAnswer(action string, content map[string]any) (container.Answer, error) {
	switch action {
	case "accept":
		if v, _ := content[ForSessionProperty].(bool); v {
			return container.AcceptedForSession, nil
		}
		return container.Accepted, nil
	case "decline":
		return container.Declined, nil
	case "cancel":
		return container.Cancelled, nil
	}
	return "", fmt.Errorf("approval: unknown form action %q", action)
}
