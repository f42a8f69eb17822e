// Package proc is the process vocabulary every part of dsh that runs commands shares:
// how a process ended (Exit, with its Reason and State), a failure to start one
// (SpawnError), a start made elsewhere than by the spawner itself (Starter), and the
// capture of its output (Capture, Stream, and the Spool that owns spill files).
//
// It spawns nothing and imports nothing of dsh: the subprocess service's Supervisor
// runs local processes with it, the ssh service's Host remote ones, and the executor
// seam (package shell) reports their exits in its terms.
//
// # Captured output and spill files
//
// A Stream keeps its last MaxBytes bytes in memory; on the first overflow a spill file
// receives the whole stream so far and everything after, until SpillMaxBytes, past
// which the file is deleted and only the tail remains. The file is written in 256 kB
// blocks and brought up to date whenever its path is reported (Output, SpillPath), so a
// reader told of it finds everything captured so far.
//
// Spill files live in <root>/dsh-spill-<pid>-<random>/<owner>/ (root:
// SpoolOptions.Root, by default the system temp directory; <owner> is "no-session",
// "s-<session id>", or "h-" and a hash for an id that is not a plain name): the owner
// of a stream is the harness session it belongs to. Directories are 0700 and files
// 0600, all created exclusively (mkdirat, O_CREAT|O_EXCL) relative to held directory
// descriptors with O_NOFOLLOW; before a file is created, the directories' paths are
// checked to still name the held directories. A spill or owner directory replaced by
// a symlink (or another user's directory), a symlink planted at a file's name: each
// makes that spill fail (the stream keeps its tail, reports no spill path — shown as
// "(unavailable)" — and a warning is logged), for good once the spill directory itself
// was replaced; nothing is ever written through a symlink. A directory that vanished
// (a temp cleaner deleted it) is made afresh at the next spill, and Spool.Generation
// changes. What this layer cannot do is keep a process of the same user from reading
// or replacing files it can reach: the modes stop other users, and a confined command
// must be kept from the spill root by its sandbox (a mount namespace that shows it no
// host temp directory, and a root outside every writable root). A sandbox that shows a
// session its own spill files (read-only) gets that session's directory ahead of its
// first spill from Spool.OwnerDir, which keeps it, even empty, until the session ends.
//
// The spill files of a Spool share a budget (SpoolOptions.BudgetBytes, 1 GiB by
// default): every byte is reserved before it is written. When a write would pass it,
// closed streams' files are deleted — the writing owner's own first, then other
// owners', oldest first — and the file of another owner's still-open stream is never
// taken; a stream that cannot make room stops spilling. When a session ends
// (Spool.EndOwner) its files are deleted; Spool.Keep takes them out of the spool
// instead, for a caller that must keep them past the spool (`dsh call`).
package proc
