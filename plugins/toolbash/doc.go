// Package toolbash is the model-facing `bash` tool over the `shell` executor seam. It
// injects tools, shell, systemPrompt and bashEnv; it looks up jobs, approval,
// sandboxPolicy and roles at call time. Process handling stays behind the seam, so any executor
// swaps in without the model seeing a difference.
//
// The package exports the plugin contract (Plugin, Module, Config) and the typed result
// values programs decode from a call's structured content (ForegroundValue,
// BackgroundValue, told apart by their Kind). Rendering and the adaptation of a
// background process to the jobs runtime are internal. The texts below are a contract:
// the tests compare them byte for byte.
//
// # Arguments
//
// command (string, required; run by `bash -c`, no state persists between calls),
// description (string, required; 5–10 words, display only), timeoutMs (number; the
// executor applies its default and cap), workdir (string; default the session's cwd,
// a relative one resolved against it — except under a remote executor (shell.Remote),
// where the session's local cwd means nothing and the executor's own cwd on its host
// takes that role), run_in_background (boolean; only when
// enableRunInBackground), tty (boolean; only when the executor runs terminals,
// shell.Terminals), and, only when the executor confines, sandbox_permissions
// (workspace-write or danger-full-access) with justification. Other keys never reach
// the executor (the tools registry names them to the model); tty true without
// terminals is "tty is not available in this composition (the executor runs no
// terminals)".
//
// # Terminals and hand-over
//
// A tty command runs under a terminal (TERM=xterm-256color, 120×40): its output, one
// stream, is rendered as text (escape sequences removed, "\r\n" → "\n", a line
// rewritten with "\r" keeps its last version; see terminal.go), with no "[stderr]"
// section. With the jobs plugin and enableRunInBackground, a foreground command becomes
// a job of the session without a restart (handover.go): a tty command whose output has
// been quiet for inputWaitMs (config, default 1000) while it waits for input —
//
//	<output so far>\n[waiting for input: continuing as background job <id>; answer with job_write, read with job_output]
//
// — and, with onTimeout: background (config; default kill, today's rendering), a
// command still running at its timeout:
//
//	<output so far>\n[still running after <timeoutMs>ms: continuing as background job <id>; read it with job_output, stop it with job_kill]
//
// ("(no output)" when there is none). Their typed value is a BackgroundValue with
// handOver "input" or "timeout". A tty job (started in the background with tty, or
// handed over) takes input through job_write; its reads are rendered the same way.
//
// # Validation, in this order (each an "Error: <message>" result; nothing runs)
//
//	invalid command: expected a non-empty string
//	invalid description: expected a non-empty string
//	invalid timeoutMs: expected a positive number, got <json>
//	invalid escalation: sandbox_permissions requires a justification
//	invalid escalation: justification is only valid together with sandbox_permissions
//	invalid justification: expected a non-empty sentence
//	sandbox_permissions is not available in this composition (no sandboxing executor to escalate)
//	background execution is disabled for this bash tool
//	background jobs unavailable: load the jobs plugin
//	tty is not available in this composition (the executor runs no terminals)
//
// An escalation must be strictly wider than the call's effective mode (`sandbox
// escalation to "<m>" is not strictly wider than this call's current "<eff>" mode`) and
// is approved once by the approval service: rejected → `the user rejected escalating
// this command to "<m>"`; cancelled → `approval for escalating to "<m>" was cancelled`;
// unavailable → `sandbox escalation to "<m>" requires approval, but no approval channel
// is available`; no approval service → `sandbox escalation to "<m>" requires approval,
// but no approval service is composed`.
//
// A session's role may set a ceiling on the sandbox mode (the roles plugin's maxMode):
// the session sees a schema offering only the escalations within it (Tool.Shape), its
// calls run in at most that mode whatever the default or its override, and a wider
// escalation is refused before anyone is asked: `sandbox escalation to "<m>" exceeds the
// "<role>" role's ceiling "<max>"`. Under an executor that does not confine, the calls of
// a role with a ceiling are refused: `the "<role>" role's sandbox ceiling "<max>" cannot be kept: this
// composition's executor does not confine commands`.
//
// # Rendering (foreground)
//
//  1. Each stream's text; a truncated stream gets "\n[output truncated; full output:
//     <path>]" ("(unavailable)" when no complete spill file exists).
//  2. Body = stdout; when stderr is not empty: a "\n" if the body is not empty and does
//     not end in one, then "[stderr]\n<stderr>". An empty body is "(no output)".
//  3. Markers, one per line, after a "\n" when the body lacks one, in this order: the
//     sandbox denial marker "[sandbox: file access denied under <mode> mode]" (and the
//     escalation hint when escalation is advertised), or "[sandbox: the sandbox runner
//     itself failed under <mode> mode — …]" when the sandbox could not start it;
//     "[timed out after <timeoutMs>ms]"; then "[killed by signal: <SIG>]" when a signal
//     ended the command, else "[exit code: <N>]" when N ≠ 0.
//
// For example:
//
//	echo hello                  hello\n
//	true                        (no output)
//	echo out; echo err >&2      out\n[stderr]\nerr\n
//	echo failing; exit 3        failing\n[exit code: 3]
//	sleep 60 (timeoutMs 100)    (no output)\n[timed out after 100ms]\n[killed by signal: SIGTERM]
//
// A nonzero exit is a normal result; only infrastructure failures and aborts are
// errors. A background start replies exactly "started background job <id>"; the job's
// outcome is killed ("signal: SIGTERM", or "killed before exit") or completed
// ("exit code: <N>"), and a lossy read of its output appends "[some output was dropped
// from memory; full output: <paths, or (unavailable)>]".
//
// The prompt section tool:bash (order 105) reads: "Check the [exit code: N] marker on
// every bash result; investigate failures before moving on."
package toolbash
