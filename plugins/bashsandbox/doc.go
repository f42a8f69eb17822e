// Package bashsandbox is the bash-sandbox plugin: the confining `shell` provider and the
// `sandboxPolicy` service. It runs every command as `bash -c` through the `subprocess`
// service, like bash-local (same configuration keys, same executor core, same results),
// but confined — and it fails closed.
//
// # The executor
//
// Each call's policy is the spec's Sandbox (the bash tool resolves it per session with
// the sandboxPolicy service: an approved escalation, else the session's override, else
// the default mode; the workspace root is the session's), or, without one, the default
// mode with the configured root. Then:
//
//   - danger-full-access runs bash directly, unconfined, and reports
//     Sandbox{Mode: "danger-full-access", Denied: false};
//   - read-only and workspace-write need a usable backend (Probe, once per process):
//     otherwise Execute fails with the fail-closed error (UnavailableError) and nothing
//     runs. With one, bash is started by the session's sandbox, and the result's Sandbox
//     facts say whether the sandbox denied something (Classify), whether the sandbox
//     runner itself failed, and whether the host enforces every guarantee below
//     ("full") or not ("partial").
//
// SandboxMode reports the configured default mode; the plugin also contributes the
// `sandbox:policy` prompt section (order 110), per session.
//
// # The session sandbox
//
// Each harness session gets one sandbox process: the dsh binary re-executed with the
// hidden first argument SessionArg, once, when the session's first confined call runs.
// The sandbox's package dispatches it from its init function, before the rest of the
// binary is initialised (MaybeRunLauncher, called first thing in main, is the
// documented dispatch; embedders call it in their own main, test packages in TestMain).
// The Supervisor starts it like any command — in a cgroup of the harness's subtree,
// captured, killed when the Supervisor closes — through a proc.Starter that adds
// the namespaces:
//
//   - new user, mount, PID, IPC and UTS namespaces, and a network namespace (with only
//     a loopback, brought up) when the network is denied. The user namespace maps each id
//     to itself (as root every id, otherwise only the harness's own uid and gid), so
//     files keep their owners and commands run as the harness's user;
//   - a new root: the host's tree bound read-only, nosuid and nodev (submounts too);
//     the session's private temp dir at /tmp; a small /dev (null, zero, full, random,
//     urandom, tty bound read-only from the host — the devices stay readable and
//     writable, their modes, owners and times do not change — a fresh devpts, a private
//     /dev/shm); a fresh /proc for the PID namespace (with /proc/sys read-only, and
//     nested user namespaces disabled through it); the workspace root, bound read-write
//     from the directory pinned at session start; the configured writableRoots
//     read-write; then the server's directories covered by an empty read-only tmpfs
//     wherever a command could see them (below), with the session's own spill
//     directory bound read-only through them at its host path (below), each
//     protected path bound read-only over itself (below), and the harness's secret
//     files covered by an empty read-only file (below).
//
// dsh talks to it over a unix socket (the internal launch package's protocol). For each
// command it sends the argv, directory, environment and policy, with the command's
// stdin, stdout, stderr and cgroup as descriptors; the sandbox starts the command from a
// new OS thread of its own, which it first confines — no_new_privs, securebits that stop
// root regaining capabilities, the bounding and ambient sets emptied, no capability
// left, a new Landlock domain for the command's mode — then forks and execs from it
// (the child inherits the thread's credentials and domain), with a new session, the
// three descriptors only, into the command's cgroup (clone3 CLONE_INTO_CGROUP). The
// thread then dies. The command filter (seccomp: the keyring calls always, sockets and
// io_uring with the network denied) is installed once on the whole sandbox process,
// which creates no socket after its set-up, so every command inherits it without
// paying for its compilation. The sandbox answers with the leader's pidfd,
// from which dsh learns the host pid; it is the leader's parent (and the init of the
// PID namespace, or a subreaper without one), so it reports the leader's exit without
// reaping it (waitid WNOWAIT) and reaps it only when the Supervisor releases it — the
// Supervisor's invariant holds: the leader's pid, which is the group id it signals,
// cannot be reused while it may still be signalled. Orphans re-parented to the sandbox
// are reaped a moment after they exit.
//
// A session's sandbox lives until the session ends (its commands finish first), is
// replaced when a reload changes its configuration (the old one ends once its commands
// are done), and dies with the Supervisor. If it dies, every command in it dies too
// (it is the init of their PID namespace; without namespaces the Supervisor kills their
// cgroups), and their handles settle killed at once with a note
// "[subprocess: bash-sandbox: the session sandbox (pid N) ended; the command was killed
// with it]"; the session's next call starts a new sandbox. If the sandbox cannot
// be built, the call is a runner failure: the runner-failure stub (the dsh binary again,
// with a hidden argument) writes exactly one "dsh-sandbox: <message>" line and exits
// 125, and Classify reports it as RunnerFailed, never as a denial. The executor reports
// a runner failure only when the stub did run (dsh started it, or the sandbox said it
// started it in the command's place: launch.Reply.Stub): a command that writes the
// same line and exits 125 ran, and is reported as an ordinary failure.
//
// # What each mode permits
//
//   - read-only: read, list and execute everywhere the sandbox shows; write only
//     /dev/null, /dev/zero and /dev/full. /dev/tty and /dev/pts/* are not writable.
//     A command's own stdio pipes stay usable.
//   - workspace-write: additionally everything (create, write, truncate, remove, rename
//     and link across directories) under the pinned workspace root, the session's
//     private /tmp (TMPDIR=/tmp), the private /dev/shm and each configured
//     writableRoots directory — except the protected paths.
//   - danger-full-access: no sandbox at all.
//
// # Security model
//
// A confined command, and everything it starts, cannot widen its own confinement, now
// or later, nor act through a more privileged process. Each guarantee, the mechanism
// behind it, and the test that attacks it (all in read-only and workspace-write, as
// root; those marked * also as uid 65534, by TestUnprivileged):
//
//   - Writable set. The read-only root bind and Landlock. The host's /tmp is replaced
//     by the session's own, removed when the session ends. Landlock does not govern a
//     file's metadata (chmod, chown, utimes, xattrs): the read-only mounts do, so the
//     host device nodes the sandbox shows are bound read-only too.
//     TestConfinedPrivateTmp*, TestStackReadOnly*, TestStackWorkspaceWrite*,
//     TestConfinedHostDevicesReadOnly*.
//   - Protected paths, read-only even in a writable root: .git and .dsh at the workspace
//     root, every file of the running profile and each base it extends, $DSH_HOME.
//     Read-only binds; their ancestors below the root are bound over themselves
//     read-write, so a protected file cannot be moved away with its directory and
//     replaced. A protected path that does not exist yet cannot be made read-only
//     without writing to the workspace; the sandbox binds it before the first command
//     after it appears (a `git init` works; the next command cannot plant a hook — the
//     one that ran `git init` can: see Known gaps). A protected path that is a symlink
//     inside a writable root, or is reached through one, fails the call.
//     TestConfinedProtectedPaths*, TestConfinedProtectedPathAppears*,
//     TestConfinedProfileThroughSymlinkRefused*,
//     TestServeConfinedCannotRewriteItsProfile (cmd/dsh).
//   - Pinned workspace. The root is resolved when the session is first seen and held
//     open; every confined call checks that the path still names that directory, else
//     fails with a WorkspaceMovedError naming it and nothing runs; the sandbox mounts
//     the pinned directory itself. TestConfinedWorkspacePinned*.
//   - No privilege. No capability in any set, an empty bounding set, no_new_privs 1,
//     nested user namespaces disabled; mknod, raw and packet sockets, sethostname and
//     interface changes are refused. Only descriptors 0–2: everything the sandbox
//     inherited is close-on-exec, received descriptors too. Kernel keyrings are not
//     namespaced: a command would inherit dsh's session keyring (a login's Kerberos
//     tickets and other secrets) and could read and change it, so add_key, request_key
//     and keyctl fail with ENOSYS, whatever the network policy. TestConfinedNoPrivilege*,
//     TestConfinedNoInheritedDescriptors*, TestConfinedNoKeyring*,
//     TestCallInheritedDescriptorDoesNotLeak (cmd/dsh).
//   - No reach outside (network "deny"). An empty network namespace (TCP and UDP reach
//     only its loopback; Landlock denies TCP connect and bind there too); the seccomp
//     filter refuses socket(2) for every family but AF_INET, AF_INET6 and AF_NETLINK —
//     so no UNIX socket can be created (a read-only mount does not stop connect(2) to a
//     host's tmux, ssh-agent or docker.sock), no packet, vsock or Bluetooth socket —
//     and Multipath TCP, io_uring (which can open sockets) and socketcall(2).
//     socketpair(2) works. Other processes: the PID namespace and a fresh /proc hide
//     them, dsh included (dsh is not dumpable either); inside the session, each command
//     is its own Landlock domain, so it cannot signal, trace or read the /proc files of
//     another command or of the sandbox. TestConfinedNoReachOutside*,
//     TestConfinedNoTmux*, TestConfinedOtherProcesses*, TestStackNetwork*.
//   - The server never writes for the sandbox. Spill files live in per-session
//     directories the subprocess service creates without following symlinks below the
//     spill root — but it trusts the spill root's own path, and dsh makes the
//     sessions' directories (their private temp dirs) by path under the host's temp
//     dir, as every dsh does. Wherever a command could see the spill root or the temp
//     dir (outside /tmp, or inside a writable root, which is bound over the private
//     /tmp), it is covered by an empty read-only tmpfs, with its ancestors inside the
//     writable root bound over themselves so that they cannot be moved away and the
//     path redirected through a symlink. One that is or holds a writable root (a
//     workspace at /tmp, where both live by default), or a spill root inside a writable
//     root that does not exist or is reached through a symlink, refuses the call
//     (ExposedError). TestConfinedSpillFilesHidden*,
//     TestConfinedSpillRootInWorkspace*, TestConfinedExposingConfigRefused*,
//     TestConfinedSessionDirsHidden*, TestConfinedProtectedPathHoldingTheSpillRoot*.
//   - Own spill files, read-only. A truncated result names its spill file
//     (<spill root>/dsh-spill-<pid>-<rand>/<session dir>/<n>-stdout.log) and the bash
//     tool tells the model to read it: the session's commands see exactly that
//     directory — the one their foreground calls and background jobs spill into —
//     read-only (and nosuid, nodev, noexec), at that very path, and nothing else of
//     the spill root: no other session's directory, no other dsh's spill directory.
//     The directory is made when the session's sandbox starts (subprocess's
//     Spool.OwnerDir) and kept until the session ends, so spills made later show
//     too; the sandbox receives it as a descriptor and binds that same directory.
//     Its mount point is made where no command has been: in the tmpfs covering a
//     hidden spill root before that tmpfs is made read-only, or — for a spill root
//     under /tmp, which the private /tmp replaces — in a read-only tmpfs of its own
//     over <spill root>/dsh-spill-<pid>-<rand> inside the private /tmp. Nothing a
//     command does there reaches the host's spill directory, which the server writes
//     by its host path, outside the sandbox. Spill files that `dsh call` keeps are
//     moved to $DSH_HOME/spill, readable as the rest of $DSH_HOME.
//     TestConfinedOwnSpillFilesReadOnly*, TestConfinedSpillFilesHidden*,
//     TestServeConfinedReadsItsSpillFile, TestServeHTTPSpillFilesArePrivate,
//     TestCallConfinedReadsItsKeptSpillFile (cmd/dsh).
//   - Secrets. $DSH_HOME/serve-token — the bearer token `dsh serve --http` generates,
//     which would let a command drive dsh's own HTTP endpoint — reads as an empty
//     read-only file, for the call's $DSH_HOME, this process's and the default
//     ~/.dsh; so does every file given to HideFile (`dsh serve` gives it its
//     --token-file). The rest of $DSH_HOME stays readable. A masked file that appears,
//     or is replaced (a rename over a mount point in another namespace detaches the
//     mount), after the sandbox started is covered again before the next command.
//     TestConfinedServeTokenHidden*, TestServeNetworkAllowSelfApprovedEscalation,
//     TestServeTokenFileHiddenFromConfinedCommands,
//     TestServeGeneratedTokenHiddenFromConfinedCommands (cmd/dsh).
//   - Reloads are visible. A reload that widens confinement (a wider defaultMode, the
//     network allowed, an added writable root, namespaces turned off, or the executor
//     swapped for one that does not confine) is applied and logged at WARN as
//     "profile reload widens confinement: <what>". TestReloadWideningIsLogged,
//     TestServeWideningReloadIsLogged (cmd/dsh).
//   - Approval prompts show the command and justification with control characters
//     escaped, and padding (runs of blank lines or spaces) collapsed, so that no part
//     of the command scrolls out of sight (package approval).
//     TestApprovalPromptEscapesTheCommand, approval's TestMessageCollapsesPadding.
//
// With the network allowed, nothing of "no reach outside" holds, and the filesystem
// guarantees can be undone through any more privileged process a command can reach:
// the host's loopback services — dsh's own HTTP endpoint among them, where a command
// holding a bearer token it can read (not the hidden ones above; a --token-file of
// another dsh is not hidden here) can open a session of its own and approve its own
// escalation to danger-full-access — and its UNIX sockets (docker.sock, D-Bus and
// `systemd-run`, an ssh-agent). Allow the network only for commands you would run
// unconfined.
//
// What this costs users, with the network denied: programs cannot create UNIX sockets
// (local IPC servers in test suites, ssh-agent, gpg-agent, D-Bus, X11, Docker), nor use
// io_uring; a command's TCP servers cannot even listen on the sandbox's loopback.
// Protected paths are read-only: `git commit` in workspace-write needs an escalation.
// The host's /tmp (and its sockets) is not visible; TMPDIR is the session's own.
//
// # Enforcement and the Landlock-only fallback
//
// Where the host cannot create the namespaces (no unprivileged user namespaces), or the
// configuration says `namespaces: off`, the sandbox process is started without them and
// confines each command the same way — Landlock, capabilities, the seccomp filter
// (which then also refuses UDP, raw and every non-stream inet socket, since no network
// namespace contains them) — with the session's private temp dir as TMPDIR. What is
// then missing is named by Missing and shown in the row's status detail, and results
// report enforcement "partial": protected paths inside writable roots cannot be made
// read-only (so the executor refuses to start when its writable roots hold a profile
// file or $DSH_HOME, and workspace-write calls fail closed with an UnprotectableError
// naming the path and the root while one exists — a workspace with a .git, typically);
// other sessions' spill files (and the host's /tmp) stay readable, as do a session's
// own (where the server wrote them: nothing needs showing); secret files cannot be
// masked (the serve token stays readable); no read-only mount
// keeps a command from changing the metadata of files its user owns outside the
// writable set (chmod, chown, touch — as root, of the host's system files, e.g. setting
// a setuid bit); a host that has user
// namespaces but has them turned off lets commands create nested ones; an unprivileged
// harness cannot empty the bounding set. An older kernel's Landlock ABI also makes
// enforcement partial (truncate below ABI 3, TCP below 4, scoping of signals and
// abstract sockets below 6). TestFallbackLandlockOnly*, TestFallbackRefusesUnprotectableConfig.
// A kernel without Landlock is not partial: the probe fails and confined calls fail
// closed (TestStackFailClosed, TestNotDispatchedStartsNothing).
//
// # Known gaps
//
// A test named after a gap reproduces it, skipped until the gap is closed.
//
//   - A protected path that does not exist when a command runs can be created by that
//     command (see above); it is protected from the next command on. For .git this is
//     an escape, not a detail: in a workspace that is not (yet) a repository, or a
//     subdirectory of one, a command creates .git with hooks or core.fsmonitor, and the
//     user's next git command there — a shell prompt runs one on every cd — runs them
//     unconfined. TestConfinedGapGitCreatedByACommand.
//   - Only .git at the workspace root is protected: git looks in the current directory
//     first, so a repository a command plants in a subdirectory (a .git there, or the
//     directory shaped as a bare repository) is honoured by the user's git in it.
//     TestConfinedGapNestedRepository.
//   - A protected path that appears while a command runs (the user runs `git init`
//     during a background job) is bound read-only before the next command starts, but
//     a running command that entered it before (its working directory, or a descriptor
//     open on it) keeps writing there. TestConfinedGapJobInsideAppearingProtectedPath.
//   - A profile file reached through a symlinked directory inside a writable root cannot
//     be protected (a command could point the link elsewhere): every confined call is
//     then refused, naming the link, rather than run with the profile redirectable.
//     TestConfinedProfileThroughSymlinkRefused.
//   - Nothing bounds a command's resources beyond the Supervisor's cgroups: no pids,
//     memory or disk limit (a fork bomb, the private /tmp and the private /dev/shm —
//     a tmpfs of half the RAM, kept until the session ends — can exhaust the host).
//   - A workspace of / is bound over the root, where path lookups never see it:
//     nothing is writable in workspace-write.
//   - A command's orphaned descendants' zombies linger up to a tenth of a second
//     before the sandbox reaps them.
//   - If the sandbox process dies, the kernel reaps its children at once; between that
//     and dsh noticing the closed connection, the Supervisor could in theory signal a
//     group id already reused (it would need a full pid wrap in that window).
//   - A command can make its own failure read as a denial (print "Permission denied"
//     and exit nonzero): the result then carries the denial marker and the escalation
//     hint, inviting the model to ask for a wider mode. The user still decides.
//   - The denial classifier reads English strerror texts: commands running under a
//     non-English LC_MESSAGES/LANG report denials in their language, which are then not
//     recognised. EBUSY (moving a protected mount point) is not counted as a denial.
//   - A background job started before a profile swap keeps the executor it started
//     with: a job started under bash-local stays unconfined to its end.
//   - Secret files are masked before each command starts: a command already running
//     when one appears or is replaced (another `dsh serve --http` writing
//     $DSH_HOME/serve-token) can read it, and keep a copy. A --token-file is hidden
//     only in the sandboxes of the dsh that was given it (HideFile): other dsh
//     processes' confined commands read it if their user can.
//   - A spill root whose path goes through a symbolic link under /tmp: the path a
//     result names goes through the link, which the private /tmp does not have, so
//     the session's own spill files are not found there (they are shown at the
//     canonical path).
package bashsandbox
