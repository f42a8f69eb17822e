// Package bashsandbox is the bash-sandbox plugin: the confining `shell` provider and the
// `sandboxPolicy` service (SPEC §8). It runs every command as `bash -c` through the
// `subprocess` service, like bash-local (same configuration keys, same executor core),
// but confined by Landlock, and it fails closed.
//
// # The executor
//
// Each call's policy is the spec's Sandbox (the bash tool resolves it per session with
// the sandboxPolicy service: an approved escalation, else the session's override, else
// the default mode; the workspace root is the session's canonical cwd), or, without
// one, the default mode with the configured root. Then:
//
//   - danger-full-access runs bash directly, unconfined, and reports
//     Sandbox{Mode: "danger-full-access", Denied: false};
//   - read-only and workspace-write need a usable backend (Probe, once per process):
//     otherwise Execute fails with the SPEC's fail-closed message (UnavailableError)
//     and nothing runs. With one, bash runs through the launcher, and the result's
//     Sandbox facts say whether the sandbox denied something (Classify), whether the
//     launcher itself failed, and how completely the kernel enforces the policy.
//
// SandboxMode reports the configured default mode; the plugin also contributes the
// `sandbox:policy` prompt section (order 110), per session.
//
// # The launcher
//
// Confinement is Landlock, applied by a small launcher: the dsh binary re-executes itself
// with the hidden first argument LauncherArg. The harness process itself is never
// restricted.
//
//	argv = [<dsh binary>, LauncherArg, <policy JSON>, <program>, <args>...]
//
// The launcher lives in its own package (internal/launch), whose init function
// dispatches it: that package imports only what the Go runtime's own start-up
// initialises anyway, so a launcher process confines itself and execs its command
// before the rest of the binary's packages are initialised — its start-up is that of a
// small Go program, whatever the binary links. MaybeRunLauncher, called first thing in
// main (embedders: in their own main; tests: in TestMain or an init function), is the
// documented dispatch and records that the binary dispatches the launcher; LauncherArgv
// refuses to build a launcher argv in a binary that never called it (re-executing
// such a binary could run its ordinary main, or a test binary's tests, recursively).
//
// The policy travels in argv[2] as a JSON LaunchPolicy (mode, workspace root, writable
// roots, network) — never in the environment, so the confined command sees exactly the
// environment its executor built; after the exec the policy is gone from the process's
// argv too. The program is looked up in the launcher's PATH. On any failure before the
// exec (bad policy, missing root, Landlock unavailable or failing, exec failing) the
// launcher writes exactly one line "dsh-sandbox: <message>" to stderr and exits 125:
// the command did not run. Classify reads that as a runner failure, never as a denial.
//
// # What each mode permits
//
//   - read-only: read, list and execute everywhere; write only /dev/null, /dev/zero and
//     /dev/full. /dev/tty and /dev/pts/* are not writable (commands run without a
//     controlling terminal, and a confined command must not type into someone's
//     terminal). A command's own stdio pipes (/dev/stdout, /dev/stderr, /dev/fd/N) are
//     not filesystem objects and stay usable. Bash's here-documents work (bash 5.1+ uses
//     pipes for them unless they exceed a pipe's capacity).
//   - workspace-write: additionally everything (create, write, truncate, remove, rename
//     and link across directories) under the canonical workspace root and TempDirs():
//     /tmp, /var/tmp, /dev/shm and $TMPDIR. Paths are resolved by the kernel, so a
//     symlink in the workspace pointing outside grants nothing.
//   - danger-full-access: no launcher at all.
//
// In both confined modes: device ioctls are denied; signals to processes outside the
// sandbox fail with EPERM (ABI 6+); with network "deny", TCP connect and bind fail with
// EACCES (ABI 4+; UDP from ABI 10), connections to abstract UNIX sockets outside the
// sandbox are refused (ABI 6+), and a seccomp filter makes socket(2) with IPPROTO_MPTCP
// fail with EACCES — Landlock does not cover Multipath TCP, which would otherwise bypass
// the network rules. no_new_privs is set, so setuid programs gain nothing.
//
// # Enforcement
//
// Enforcement(policy) is "full" when the running kernel's Landlock ABI reaches
// RequiredABI(policy) — 3 for the file rules (truncate(2) is restricted from ABI 3), 4
// when the network is denied — and the MPTCP filter exists for the architecture (amd64,
// arm64); otherwise "partial". The hardening beyond SPEC §8 (ioctl, scopes, UDP) is
// applied when available and does not count. A kernel without Landlock is not partial:
// the probe fails and executors fail closed.
//
// # Known gaps
//
//   - UDP is restricted only from Landlock ABI 10; pathname UNIX sockets (e.g. a Docker
//     socket) from ABI 9 with the network denied.
//   - On amd64, 32-bit programs using socketcall(2) escape the MPTCP filter (its
//     arguments are out of a seccomp filter's reach).
//   - The denial classifier reads English strerror texts: commands running under a
//     non-English LC_MESSAGES/LANG report denials in their language and are then not
//     recognised.
//   - A background job started before a profile swap keeps the executor it started
//     with: a job started under bash-local stays unconfined to its end.
package bashsandbox
