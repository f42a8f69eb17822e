// Package jobs provides the `jobs` service — the runtime that tracks background work
// (bash commands today, other producers tomorrow) — and the model-facing job_output,
// job_write, job_list and job_kill tools.
//
// A producer starts a job with Runtime.Start, handing over hooks to cancel it, to know
// when it is done, to read its new output and to learn its outcome, and — for work that
// takes input, a command under a terminal — to write its input. The runtime owns
// everything else: ids, per-session visibility, statuses, waiting, completion notices
// and disposal. Job records live in the runtime, not in the producer, so they survive a
// reload of the plugin that started them.
//
// Guarantees: ids are <kind>-<n> with a counter per kind; a job is visible only to its
// owner session (others get `job <id> belongs to another session`); Start checks, in
// order, the kind and label, the per-owner limit (maxConcurrentJobsPerOwner) and the
// harness-wide one (maxJobsTotal) before it runs anything; the first outcome wins; a
// session's end cancels, awaits and deletes its jobs; a session keeps at most
// maxFinishedJobsPerOwner finished ones (the oldest are forgotten); each owned job's
// completion is announced once. The tools' texts are exact (see the tool definitions).
package jobs
