// Package cli is the dsh command line: serve (MCP), call, status, tools, prompt, check,
// explain (how a profile's rules and roles judge a bash command; docs/policy.md).
// It is a package (not just package main) so that embedders can build their own dsh
// binary with extra plugin modules: see Main.
//
// # Serving
//
// `dsh serve` speaks MCP on stdio, or on streamable HTTP at /mcp (--http). Both carry
// the session-based revisions (2024-11-05 … 2025-11-25: initialize, Mcp-Session-Id) and
// the stateless revision 2026-07-28 (server/discover, per-request _meta), chosen per
// request by the Mcp-Protocol-Version header or the request's _meta.
//
//   - A harness session (container.Session: DSH_SESSION_ID, cwd = the workspace, the
//     owner of background jobs) is one MCP session on the session lane, one stdio
//     connection, or — on the stateless HTTP lane — one principal: the bearer token. A
//     principal's session id is derived from its token, so replicas sharing a token
//     agree on it; its jobs are fenced from other principals like a session's.
//   - HTTP needs "Authorization: Bearer <token>" (401 with WWW-Authenticate: Bearer
//     otherwise; tokens compared in constant time); paths other than /mcp are 404; a
//     non-loopback address needs --allow-remote (else exit 2). --max-sessions bounds
//     session-lane sessions plus principals (HTTP 503 beyond); a principal idle for
//     --session-timeout ends like a session.
//   - Job completion notices: a log notification (logger dsh.jobs) on the session
//     lane; on the stateless lane, notifications/resources/updated for dsh://notices on
//     the client's subscriptions/listen stream, with the text in _meta["dev.dsh/notice"].
//   - Approval (sandbox escalation): an elicitation request on the session lane; an
//     input_required result on the stateless lane, answered by the client's retry,
//     whose requestState is an HMAC (keyed by the principal's token, or per process on
//     stdio) over the session, tool, arguments and an expiry.
//   - A tools/call with a progressToken gets notifications/progress every 5 s (progress
//     = seconds elapsed, message "running 12s, 3.1 MB of output").
//   - stdio answers bad input (-32700 not JSON, -32600 not JSON-RPC or over 16 MiB,
//     id null) and reads on; a cancelled request (notifications/cancelled) gets no
//     response and its command is aborted.
package cli
