package container

import "context"

// Session is one harness session: an MCP session, a stateless-lane principal, or the
// single session of `dsh call`.
// Tools receive it with every call; services key ownership (jobs) and policy (sandbox
// mode, approval channel) on it. The zero value of every optional field means "absent".
type Session struct {
	// ID identifies the session; it is what DSH_SESSION_ID carries.
	ID string
	// Cwd is the session's workspace: the default workdir of its commands.
	Cwd string
	// SandboxMode, when set, overrides a confining executor's default mode.
	SandboxMode string
	// Role names the session's role (the roles plugin: which tools it sees, its sandbox
	// ceiling, its rules): from its bearer token's line or --role. Empty: the roles
	// plugin's default role.
	Role string
	// Notifier receives notices for the session (job completions); nil drops them.
	Notifier Notifier
	// Prompter asks the session's user a question (MCP elicitation, a terminal);
	// nil means the session has no interactive channel.
	Prompter Prompter
}

// Notifier delivers an out-of-band notice to a session's client.
type Notifier interface {
	Notify(text string)
}

// Answer is a user's reply to a Prompter.
type Answer string

const (
	// Accepted: the user agreed.
	Accepted Answer = "accept"
	// Declined: the user said no.
	Declined Answer = "decline"
	// Cancelled: the user dismissed the question without answering.
	Cancelled Answer = "cancel"
	// AcceptedForSession: the user agreed for the rest of the session (only an answer
	// to SessionPrompter.ConfirmForSession).
	AcceptedForSession Answer = "accept-for-session"
)

// Prompter asks the user of a session to confirm something. An error means the channel
// could not carry the question at all.
type Prompter interface {
	Confirm(ctx context.Context, message string) (Answer, error)
}

// SessionPrompter is a Prompter that can also offer to agree for the rest of the
// session (a form elicitation with a forSession boolean, a terminal's [o/s/N]). The
// approval service asks through it when the asker can remember such an answer, and
// through Confirm otherwise; a Prompter without it is only ever asked once-or-not.
type SessionPrompter interface {
	Prompter
	// ConfirmForSession shows message and returns Accepted (this once),
	// AcceptedForSession, Declined or Cancelled. An error means the channel could not
	// carry the question.
	ConfirmForSession(ctx context.Context, message string) (Answer, error)
}
