// Package tools provides the `tools` service: the registry of model-facing tools, their
// argument validation, and the shape of their results.
//
// Guarantees:
//   - A tool's registration belongs to the activation that registered it and disappears
//     when that activation ends; registering a name twice fails.
//   - Arguments are validated against the tool's input schema before Execute runs, with
//     the same messages for every tool and property: `missing required property
//     "command"`, `"command" must be a string`, `"timeoutMs" must be a number`,
//     `"run_in_background" must be a boolean`.
//   - Keys the schema does not declare never reach the tool's work (Call.Extra lets a
//     tool look at them); the text of a successful result then opens with
//     `[ignored unknown argument: timeout]` (or `[ignored unknown arguments: a, b]`).
//   - Every outcome is a Result: validation and policy failures, unknown tools,
//     infrastructure errors and panics have IsError and text "Error: <message>"; a call
//     whose context is cancelled before dispatch is `tool call aborted before
//     dispatch`, one cancelled while it runs `tool call aborted`.
package tools
