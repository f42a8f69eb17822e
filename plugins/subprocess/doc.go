// Package subprocess provides the `subprocess` service: the Supervisor that owns every
// process tree the harness spawns on this host and the output those trees produce.
//
// # Process trees
//
// Every child leads a new session (no controlling terminal: a /dev/tty prompt fails
// fast), gets the managed environment (credentials and stale DSH_* scrubbed) and has
// exactly stdin, stdout and stderr open: New marks every other descriptor of the
// harness close-on-exec (close_range, or a walk of /proc/self/fd on older kernels), so
// one the harness inherited without close-on-exec (`exec 7>>file; dsh …`) reaches no
// command. Where cgroup v2 is writable each tree also lives in a cgroup of its own,
// below a per-harness directory, so that a kill reaches descendants that left the
// process group (setsid, double fork). Executors (bash-local, bash-sandbox) spawn
// through the Supervisor; an executor reload never touches it, and closing it kills and
// reaps every tree it still owns. A tree's leader may also be started elsewhere — by a
// box (the per-session sandbox process) that stays its parent — through a
// proc.Starter (Spec.Start): the Supervisor owns that tree all the same (pipes,
// cgroup, signals, drain, settle, sweep); only the start, the exit status and the
// reaping come from the Starter.
//
// A tree spawned with Spec.Terminal runs under a pseudo-terminal instead (terminal.go):
// the slave is the leader's stdin, stdout, stderr and the controlling terminal of its
// session, the master the Supervisor's — the one output stream (Stdout) and the input
// (WriteInput, CloseInput, Resize). WaitingForInput reads from /proc whether the
// terminal's foreground process group is blocked reading it (ttywait.go).
//
// # Teardown
//
// A timeout, an abort, Kill or Close sends SIGTERM once, then SIGKILL after graceMs if
// anything is left. Each process receives at most one SIGTERM per teardown: in cgroup
// mode the signal goes to every process of the cgroup (which is frozen while its
// members are listed and signalled, so no listed pid can be reused meanwhile) and not
// also to the group; otherwise it goes to the process group. A killed tree settles
// (Process.Done) as soon as nothing is left of it — cgroup.events is watched through
// inotify, a process group is looked at after 1, 2, 4… up to 50 ms — never waiting out
// graceMs for an empty tree. After the leader exits, the output pipes get at most
// graceMs to drain. The leader stays an unreaped zombie until nothing will signal its
// group any more, so a group id is never signalled once it may belong to an unrelated
// process.
//
// # Captured output
//
// Each tree's stdout and stderr are captured into streams of the Supervisor's Spool
// (see package proc: the tail in memory, the whole stream in a spill file up to its
// cap, a shared budget), owned by the session the process runs for (Spec.Owner). A
// stream whose reads keep filling their buffer reads 1 MB at a time from a pipe grown
// to 1 MB. When a harness session ends its spill files are deleted (the plugin wires
// Spool.EndOwner to the container's session end).
//
// # Crash cleanup
//
// New starts a watchdog, in the background (the first spawn waits until it runs): the
// harness binary re-executed with a hidden argument, dispatched from the init function
// of a package with a minimal import set, so it runs before the rest of the binary is
// initialised, in every binary that links subprocess. A main may start it earlier
// still, from an init of its own (package early, which dsh's main uses for serve and
// call): the first Supervisor then takes that one over and names its cgroup to it.
// It is detached (no child of the harness), leads its own session, holds none of the
// harness's stdio and lives outside the cgroup it guards. It reads a pipe whose only
// write end the harness holds: when that closes because the harness died (SIGKILL, a
// crash), it writes cgroup.kill on the harness's cgroup directory — ending foreground
// and background commands, setsid escapees and nohup children alike — SIGKILLs the
// process groups of commands that have no cgroup, removes the directory and exits;
// after a normal Close it just exits. The watchdog is supervised: its death closes the
// pipe's other end, which the harness's end reports; the Supervisor logs it (WARN),
// starts a new watchdog and tells it every process group the dead one knew, so a crash
// of the harness after that still ends every command. A new Supervisor also kills and removes what dead
// harnesses left in their cgroup directories (logged at WARN with the count). A
// directory belongs to a dead harness when no process holds its lock (flock, held by a
// live harness) and its pid is gone.
package subprocess
