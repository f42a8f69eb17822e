package approval

import (
	"context"

	"github.com/dsh-dev/dsh/container"
)

// Service is the key the approval plugin provides its Approver under. Callers
// look it up at call time; a composition without it cannot approve anything.
var Service = container.NewKey[Approver]("approval")

// Outcome is the answer to an approval request. The five values are the whole
// vocabulary (four unless the request offers ForSession); anything else must be
// treated as "not approved".
type Outcome string

const (
	// AllowedOnce approves this one call only.
	AllowedOnce Outcome = "allowed-once"
	// AllowedForSession approves this call and tells the asker to allow what it asked
	// about for the rest of the session. Only a request with ForSession gets it.
	AllowedForSession Outcome = "allowed-for-session"
	// Rejected: the user (or the configured policy) said no.
	Rejected Outcome = "rejected"
	// Cancelled: the question was dismissed without an answer.
	Cancelled Outcome = "cancelled"
	// Unavailable: the session has no channel to ask its user.
	Unavailable Outcome = "unavailable"
)

// Request asks a session's user to allow something once (or, with ForSession, for the
// rest of the session).
type Request struct {
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
	// Source names the policy that asks, for a call the pre-execute waterfall put to
	// the user (`rule "git push *"`); Reason is then that policy's reason, possibly
	// empty. Empty for a sandbox escalation.
	Source string
	// ForSession says the asker can remember an answer for the rest of the session: the
	// question then offers it, and AllowedForSession is a possible outcome. Sandbox
	// escalations leave it false: they are allowed once or not.
	ForSession bool
}

// Approver is the `approval` service: it asks (or decides by policy) and returns one of
// the outcomes. Tools look it up at call time (container.Lookup(services, approval.Service)). Request must honour ctx
// (a cancelled call returns Cancelled) and must not panic.
type Approver interface {
	Request(ctx context.Context, req Request) Outcome
}
