// Package approval provides the `approval` service: the one place a tool asks a session's
// user to allow something (a sandbox escalation of one bash call, a call a policy of the
// pre-execute waterfall asks about). It defines the service's vocabulary (Service,
// Approver, Request and the Outcomes: allowed-once, allowed-for-session — only when the
// request offers it; sandbox escalations never do — rejected, cancelled, unavailable)
// and the plugin that provides it.
//
// The configured policy decides how: `ask` (the default) puts the question to the
// session's interactive channel (container.Session.Prompter — MCP elicitation under
// `dsh serve`, a terminal under `dsh call`), `allow` approves without asking (trusted
// automation), `deny` rejects without asking. Every request and every decision is logged.
//
// A question shows each field of the request escaped (nothing in it can act on a
// terminal or draw as blank), its padding collapsed and cut at 2,000 characters, and
// names the requested sandbox mode (or the policy that asks) on its last line.
// EscapeForTerminal is the same escaping for output shown on a terminal.
package approval
