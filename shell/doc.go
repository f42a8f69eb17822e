// Package shell is the executor seam: the request/spec/result vocabulary that every
// `shell` provider implements and every caller (the bash tool, jobs, other plugins)
// uses, the sandbox policy types, and the exit-status marker contract. How an
// execution ended is a [github.com/dsh-dev/dsh/proc.Exit], the exit type every layer
// shares. It holds types and pure helpers only; executors live in their own plugin
// packages, and the core that the bash executors share is package
// [github.com/dsh-dev/dsh/shell/bashexec]. Package
// [github.com/dsh-dev/dsh/shell/shelltest] checks an executor against this contract.
//
// # The contract every executor honours
//
// A profile mounts exactly one provider of the `shell` service. Whatever it runs on —
// this host, a sandbox, a remote machine — the model must not be able to tell the
// executors apart except by what they confine. So every executor:
//
//  1. Resolve is the only place defaults and caps apply. The spec it returns is fully
//     explicit: Workdir absolute (the request's, a relative one resolved against the
//     executor's cwd, else the cwd), TimeoutMs the request's or the default, clamped to
//     the executor's cap (NaN or ≤ 0 is an error naming request.timeoutMs), Expiry
//     "kill" unless "none" was asked (then TimeoutMs is 0: no deadline) or "hand-over"
//     (TimeoutMs resolved, no deadline), StdoutMaxBytes
//     the request's or the default. Stdin, Env, DshEnv, Sandbox, SessionID and
//     Terminal (its size made explicit) are carried — copied, never shared — only when
//     given. Execute never re-defaults and
//     refuses a spec Resolve could not have produced.
//  2. A command containing a NUL byte is refused by Resolve; nothing runs.
//  3. A context that is already cancelled when Execute is called fails Execute with
//     "<executor>: aborted before spawn: <cause>"; nothing runs.
//  4. Execute returns one handle; foreground (Result) and background (ReadOutput,
//     Done, Exit, Kill) are projections of it, never two spawn paths. Cancelling
//     Execute's context later aborts the command: its tree is killed and the result
//     says Aborted. Aborted means exactly that — a call's own Kill, a timeout or a
//     disposal never set it; TimedOut is set only when the deadline fired; the first
//     cause wins and the two are never both true. A command that kills itself
//     (`kill -TERM $$`) reports its signal with neither flag.
//  5. A nonzero exit, a timeout kill and an abort kill are results. Only infrastructure
//     failures — an unusable working directory, a missing bash, a sandbox that cannot
//     confine, a lost connection — are errors of Result. A start the host refuses is
//     not an Execute error: the handle settles killed at once, its first ReadOutput
//     returns the failure once as a "[stderr]" section ("[stderr]\n<message>\n", so a
//     background job shows why it never ran), later reads return nothing, and Result
//     returns the failure.
//  6. Both streams are captured with the same bounds: StdoutMaxBytes of tail in memory
//     per stream (a truncated tail starts at a UTF-8 boundary), the complete stream in
//     a local spill file up to the executor's spill cap. A stream is Truncated when any
//     byte was dropped from memory; SpillPath is set only while a file holds the whole
//     stream.
//  7. ReadOutput is consuming: each byte is returned once. While the command runs, an
//     incomplete UTF-8 sequence at the end of a stream is held back for the next read.
//     A read that starts before the retained tail is Lossy, returns the whole retained
//     tail, and names the spill files (only lossy reads carry spill paths; "" when no
//     complete file exists). Stdout comes first; stderr follows as "[stderr]\n…" with a
//     newline before it when the stdout part does not end in one.
//  8. Results are values: RunResult, its ExitCode and Sandbox facts are copies, so a
//     caller may keep or change them without affecting later calls.
//  9. Kill ends the whole tree — SIGTERM to the command's process group (and, where the
//     executor can, every process it started), SIGKILL after the grace period to
//     whatever is left — returns false once the command has finished, and is
//     idempotent. Timeouts and aborts end the tree the same way.
//  10. Processes belong to a service (the `subprocess` service locally, the `ssh`
//     service remotely), not to the executor: reloading or swapping the executor never
//     kills a running command, and handles already handed out keep working.
//  11. Commands get the scrubbed harness environment (names containing KEY, PASSWORD,
//     SECRET or TOKEN and every inherited DSH_* removed), then NO_COLOR=1 TERM=dumb
//     PAGER=cat GIT_PAGER=cat GIT_TERMINAL_PROMPT=0, then the request's Env, then the
//     managed DshEnv snapshot last — so nothing ambient can spoof a DSH_* value. A
//     remote executor sends only the last three parts.
//  12. SandboxMode is "" for executors that do not confine; a confining executor
//     reports its default mode, fills RunResult.Sandbox, and fails closed: when it
//     cannot confine a call, the call fails and nothing runs unconfined.
//  13. An executor that implements Terminals (and reports true) runs a request with a
//     Terminal under a pseudo-terminal of that size (default 120×40), TERM
//     xterm-256color: the terminal is the command's stdin, stdout, stderr and the
//     controlling terminal of the session it leads; its output is one stream
//     (Stdout; no "[stderr]" section), raw as the terminal wrote it (escape sequences,
//     "\r\n") — rendering it as text is the caller's; the execution implements Input
//     (writes, the end of input, resizes, whether the foreground process waits for
//     input). A confining executor's terminal is inside its sandbox: a confined
//     command reaches no other terminal. Teardown and the drain bound everything as
//     for pipes. Others refuse a Terminal in Resolve.
//  14. Executions implement Activity (how much output, when it last came, its tail
//     without consuming it) and Detacher: Detach frees a running command from Execute's
//     context and its deadline, so that a caller can hand it over (to a job) without a
//     restart; what was read from it stays read. ExpiryHandOver resolves the timeout
//     like ExpiryKill but arms no deadline: the caller acts when it passes.
//
// # Exit-status markers
//
// Rendered results end with a machine-readable marker when the command failed:
// "[exit code: N]" or "[killed by signal: SIG…]", each after a newline. ParseExitStatus
// splits such text back into its body and exit status; the marker needs its leading
// newline, and the body excludes that newline.
package shell
