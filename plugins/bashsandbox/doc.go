// Package bashsandbox is the bash-sandbox plugin: the confining `shell` provider and the
// `sandboxPolicy` service. It runs every command as `bash -c` through the `subprocess`
// service, like bash-local (same configuration keys, same executor core, same results),
// but confined — and it fails closed: where no backend can confine a command, the call
// fails with UnavailableError and nothing runs.
//
// Each call's mode is an approved escalation, else the session's override, else the
// configured default (Resolver). danger-full-access runs bash unconfined. In read-only
// and workspace-write, a confined command — and everything it starts — cannot widen its
// own confinement, now or later, nor act through a more privileged process: it writes
// only the mode's writable set; protected paths (.dsh at the workspace root, .git at
// each writable root and the git directories it names, the home's startup files when a
// writable root holds $HOME, the running profile's files, $DSH_HOME) stay read-only
// inside writable roots; its workspace is the directory pinned when the session
// started; it holds no privilege and no descriptor but 0–2, and cannot leave its
// cgroup; with the network denied, no socket reaches outside and no other process is
// visible; it sees neither other sessions' or other dsh processes' spill files and temp
// dirs nor dsh's secrets (MaskFile). Where the host cannot give one of these, results report
// enforcement "partial" and the row's status names what is Missing.
//
// Each session's commands run in a box: the dsh binary re-executed once per session
// with BoxArg, in its own user, mount, PID, IPC, UTS and network namespaces, which
// builds its mount tree from a plan and forks each command from a thread it confines
// first (Landlock, capabilities, seccomp). Binaries that link this package must call
// MaybeRunLauncher first thing in main (test packages in TestMain). A box that cannot be
// built, or cannot confine a command, is a launcher failure — one "dsh-sandbox:" line,
// exit 125 — never a denial (Classify).
//
// The package does not bound a command's resources beyond the Supervisor's cgroups; with
// the network allowed, a command that reaches a more privileged process (a host service,
// dsh's own HTTP endpoint) can undo every guarantee. The design, each guarantee and how
// it is enforced and tested, the Landlock-only fallback, status reporting, the known
// gaps and the costs are in docs/sandbox.md.
package bashsandbox
