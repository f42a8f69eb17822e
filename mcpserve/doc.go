// Package mcpserve serves a running dsh composition over MCP: the live `tools` registry
// as MCP tools (tools/list_changed when it changes), the composed `systemPrompt` as the
// server instructions, and the status as the resource dsh://status. New takes the
// runtime, a version and a logger; ServeStdio speaks newline-delimited JSON-RPC on a
// reader and a writer, Serve streamable HTTP at Endpoint on a listener.
//
// Both carry two lanes, chosen per request by the Mcp-Protocol-Version header or the
// request's _meta: the session lane (revisions 2024-11-05 … 2025-11-25: initialize,
// Mcp-Session-Id) and the stateless lane (2026-07-28: server/discover, per-request
// _meta).
//
//   - A harness session (container.Session: DSH_SESSION_ID, cwd = the workspace, the
//     owner of background jobs) is one MCP session on the session lane, one stdio
//     connection, or — on the stateless HTTP lane — one principal: the bearer token. A
//     principal's session id is derived from its token, so replicas sharing a token
//     agree on it; its jobs are fenced from other principals like a session's.
//   - HTTP needs "Authorization: Bearer <token>" (401 otherwise, with WWW-Authenticate:
//     Bearer, or Bearer error="invalid_token" when a wrong token was given; tokens
//     compared in constant time); paths other than Endpoint are 404;
//     MaxSessions bounds session-lane sessions plus principals (HTTP 503 beyond); one
//     idle for SessionTimeout ends like a session.
//   - Job completion notices: a log notification (logger dsh.jobs) on the session
//     lane; on the stateless lane, notifications/resources/updated for dsh://notices on
//     the client's subscriptions/listen stream, with the text in _meta["dev.dsh/notice"].
//   - A session sees its own tools: every scope's server serves the whole registry, and
//     a session's tools/list is narrowed to the registry's ToolsFor it (its role's
//     tools, bash shaped by its ceiling); a session's role is its token's
//     (HTTPOptions.Roles) or NewSession's. A composition change that alters what a
//     listing session would see sends tools/list_changed.
//   - Approval (a gate's ask, a sandbox escalation): a form elicitation on the session
//     lane (the forSession boolean when "for the session" is offered); an
//     input_required result on the stateless lane, one question per key (approval,
//     approval-2, …), answered by the client's retry, whose requestState is an HMAC
//     (keyed by the principal's token, or per server on stdio) over the session,
//     tool, arguments, an expiry, the questions it puts and the earlier answers.
//   - A tools/call with a progressToken gets notifications/progress every 5 s (progress
//     = seconds elapsed, message "running 12s, 3.1 MB of output: <last line>").
//   - stdio answers bad input (-32700 not JSON, -32600 not JSON-RPC or over 16 MiB,
//     id null) and reads on; a cancelled request (notifications/cancelled) gets no
//     response and its command is aborted.
//
// The package does not compose profiles, read flags, choose tokens or listen: the
// caller (package cli for `dsh serve`) hands it a runtime, the tokens and a listener.
// What it does for speed alone is Tuning, off unless asked for; it never changes
// GOMAXPROCS by itself.
package mcpserve
