package shell

import (
	"context"

	"github.com/dsh-dev/dsh/container"
)

// ApprovalService is the name the approval plugin provides its Approver under. Callers
// look it up at call time; a composition without it cannot approve anything.
const ApprovalService = "approval"

// ApprovalOutcome is the answer to an approval request. The four values are the whole
// vocabulary; anything else must be treated as "not approved".
type ApprovalOutcome string

const (
	// ApprovalAllowedOnce approves this one call only.
	ApprovalAllowedOnce ApprovalOutcome = "allowed-once"
	// ApprovalRejected: the user (or the configured policy) said no.
	ApprovalRejected ApprovalOutcome = "rejected"
	// ApprovalCancelled: the question was dismissed without an answer.
	ApprovalCancelled ApprovalOutcome = "cancelled"
	// ApprovalUnavailable: the session has no channel to ask its user.
	ApprovalUnavailable ApprovalOutcome = "unavailable"
)

// ApprovalRequest asks a session's user to allow something once.
type ApprovalRequest struct {
	// Session is the calling session (its Prompter is the channel); nil when none.
	Session *container.Session
	// Tool is the tool asking, e.g. "bash".
	Tool string
	// Reason is the sentence the user is asked about, e.g.
	// "escalate sandbox to workspace-write: <justification>".
	Reason string
	// Command, Mode and Justification are the parts of Reason for channels that show
	// them separately (the command being escalated, the requested sandbox mode, the
	// model's justification). Empty when not applicable.
	Command       string
	Mode          string
	Justification string
}

// Approver is the `approval` service: it asks (or decides by policy) and returns one of
// the four outcomes. It is declared here, in the seam package, so that the tools that
// ask and the plugin that answers do not import each other. Request must honour ctx
// (a cancelled call returns ApprovalCancelled) and must not panic.
type Approver interface {
	Request(ctx context.Context, req ApprovalRequest) ApprovalOutcome
}
