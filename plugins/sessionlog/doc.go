// Package sessionlog is the `session-log` plugin: the audit log of each session — one
// JSONL file of what was called, what the waterfall decided and who approved it, how
// each call ended, and the session's background jobs (docs/hooks.md, "The audit log").
//
// Records are built on the call's goroutine and written by one goroutine of the row's
// activation through a bounded queue, so a slow or failing disk never holds up a call:
// a full queue drops the record, a failed write loses it, and both are counted in the
// row's status and logged. The file of a session is exported to its commands as
// DSH_SESSION_JSONL (a confining executor shows it read-only and hides the others'),
// and given to hooks as transcript_path.
//
// The log records no output text and no environment: arguments, decisions, exit facts,
// sizes and spill file paths only.
package sessionlog
