// Package ssh provides the `ssh` service: connections to one remote host over OpenSSH
// (golang.org/x/crypto/ssh; nothing shells out to ssh), and every command running
// there. The service owns the remote executions the way the `subprocess` service owns
// local ones: an executor (bash-ssh) starts commands through it and may be reloaded or
// swapped while they run; disposing the ssh row kills them.
//
// # Connections
//
// Config: address (host:port, required), user (default: the local user), identityFile
// (an unencrypted key; default ~/.ssh/id_ed25519, else ~/.ssh/id_rsa), knownHostsFile
// (default ~/.ssh/known_hosts), keepaliveMs (15000), maxConnections (4), spillRoot and
// spillBudgetBytes (where remote output spills locally, as for `subprocess`).
//
//   - Host keys are checked strictly: a host that known_hosts does not list, or lists
//     with another key, is refused with "ssh: host key for <address> is not trusted by
//     <knownHostsFile>", and the row fails to activate (a refused login also fails it:
//     "ssh: cannot log in to <address> as <user>: …"). A host that is merely
//     unreachable does not: the row activates disconnected and keeps reconnecting.
//   - Commands are spread over up to maxConnections connections, each carrying up to
//     nine command channels plus one control channel (OpenSSH's MaxSessions is 10; a
//     server allowing fewer is detected by its refusals). A new connection is dialed
//     when every open one is busy; a call waits for a free channel (bounded by its
//     deadline and context) when all are full. A deadline that passes while no
//     connection is up yet ends the command, never started, with "ssh: connection to
//     <address> timed out during the handshake; the command did not start" ("… during
//     the TCP connect; …" before the handshake began; proc.Exit.Err).
//   - Each connection sends keepalive@openssh.com every keepaliveMs; one that leaves a
//     request unanswered for three intervals is closed as lost.
//   - A lost connection ends its running commands with
//     "ssh: connection to <address> lost: <cause>" (proc.Exit.Err; the same line is
//     appended to the command's captured stderr, so a background job shows it). The
//     commands do not outlive it on the remote either: the connection's control shell,
//     which knows every command of its connection, kills them when its input ends (the
//     connection was lost, or dsh died); for what it could not see (a host that froze),
//     the service remembers their process groups and kills them as soon as a
//     connection is up again. A call while no connection is up dials at once; in the
//     background the service redials with exponential backoff (250 ms doubling to
//     30 s).
//   - The row's status detail is the connection state: "connected to <user>@<address>
//     (N connections, M commands running)", "disconnected from <user>@<address>: <cause>;
//     … reconnecting with backoff", plus any commands still to be killed.
//
// # Remote commands
//
// Each command is one session channel whose exec request runs, through the remote
// user's login shell (which must be POSIX: sh, bash, dash, zsh), a small bash program:
// it makes sure it leads a session of its own (OpenSSH already does this; otherwise it
// re-executes under `setsid -w`), enters the working directory (or reports the errno),
// removes every DSH_* variable of the remote login environment, exports NO_COLOR=1
// TERM=dumb PAGER=cat GIT_PAGER=cat GIT_TERMINAL_PROMPT=0, the caller's variables and
// the managed DSH_* snapshot (each value a single-quoted word: never evaluated), its
// session's tag and its own (__dsh_owner, __dsh_cmd: what finds its processes again),
// registers itself with its connection's control shell (a file in a private directory
// under the remote $TMPDIR, else /tmp), prints a start line carrying its pid and start
// time, and execs `bash --norc -c <command>`.
// Nothing of the local environment is sent; sshd's environment requests are not used
// (servers commonly refuse them).
//
//   - The command keeps the pid sshd waits for, so the exit status and signal are the
//     command's own, mapped exactly as locally (exit code, or "SIGTERM"… with no code).
//   - Timeout, abort and kill go over the connection's control channel (sshd's
//     `signal` request is refused by OpenSSH without privilege separation, and reaches
//     the leader only): SIGTERM to the command's process group, then, once the group
//     is empty or graceMs passed, SIGKILL to whatever is left — even after the leader
//     exited. The process is identified by its pid and start time, so a reused id is
//     never signalled. Done waits for that sequence: when a killed command's result is
//     returned, its group is gone.
//   - After the command exits, its output gets at most graceMs to drain (a `cmd &` left
//     holding stdout cannot hold the call), then the channel is closed.
//   - Output is captured locally through a proc.Spool: the last maxBytes of each
//     stream in memory, the whole stream in a private spill file up to its cap.
//   - A working directory the remote cannot enter fails the start like locally
//     ("spawn failed: chdir <dir>: ENOENT (no such file or directory)"); so does a
//     remote without bash ("spawn failed: exec bash: ENOENT …") and a host that
//     cannot be reached ("spawn failed: connect <address>: <cause>").
//
// A command with Spec.Terminal gets a remote pseudo-terminal (pty-req with TERM and the
// size, before the exec request): its output is the channel's stdout alone, its input
// is written to the channel (the end of input is ^D at a line start, then EOF), a
// resize is a window-change request. Whether it waits for input cannot be seen from
// here (Process.WaitingForInput is unknown).
//
// Processes that leave the command's process group on purpose (setsid, daemons) are
// out of reach remotely: there is no remote cgroup.
package ssh
