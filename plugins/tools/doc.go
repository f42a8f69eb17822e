// Package tools provides the `tools` service: the registry of model-facing tools, their
// argument validation, the pre-execute waterfall, the observers told about every call,
// and the shape of their results.
//
// Guarantees:
//   - A tool's registration belongs to the activation that registered it and disappears
//     when that activation ends; registering a name twice fails. Gates and restrictions
//     are owned the same way.
//   - Arguments are validated against the tool's input schema before Execute runs, with
//     the same messages for every tool and property: `missing required property
//     "command"`, `"command" must be a string`, `"timeoutMs" must be a number`,
//     `"run_in_background" must be a boolean`.
//   - Keys the schema does not declare never reach the tool's work (Call.Extra lets a
//     tool look at them); the text of a successful result then opens with
//     `[ignored unknown argument: timeout]` (or `[ignored unknown arguments: a, b]`).
//   - Restrictions hide tools from sessions (ToolsFor leaves them out; a call gets `tool
//     "<name>" is not available to this session (<why>)`); while none is registered, a
//     session with a role sees no tool. A tool's Shape gives a session its own
//     description and schema to see.
//   - Between validation and Execute, a call goes through the gates registered for its
//     tool (the waterfall; docs/policy.md): the strictest answer wins, a deny runs
//     nothing, an ask goes to the `approval` service, and every decision is logged with
//     its source. A tool without gates runs exactly as it would without a waterfall.
//   - Once a call has ended, the observers of its tool are told about it (Observer: the
//     arguments that ran, the decision and its source, the approval, the result, the
//     timing), in order, before the caller gets the result; they may append to its
//     text. Without observers a call runs as it would without them.
//   - Every outcome is a Result: validation and policy failures, unknown tools,
//     infrastructure errors and panics have IsError and text "Error: <message>"; a call
//     whose context is cancelled before dispatch is `tool call aborted before
//     dispatch`, one cancelled while it runs `tool call aborted`.
package tools
