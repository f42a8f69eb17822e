package proc

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// DefaultSpillBudgetBytes is the default total size of a Spool's spill files (1 GiB).
const DefaultSpillBudgetBytes = 1 << 30

// SpoolOptions configure a Spool. The zero value is ready to use.
type SpoolOptions struct {
	// Root is the directory in which the Spool creates its private spill directory
	// (default os.TempDir()). It must not lie inside anything a sandboxed command may
	// write: the Spool never follows a symlink below Root, but it trusts Root itself.
	Root string
	// BudgetBytes bounds the total size of the spill files (≤ 0 means
	// DefaultSpillBudgetBytes). When a spill write would pass it, finished streams'
	// files are deleted to make room: the writing owner's own first, then other
	// owners', oldest first; the file of a stream that is still open is never deleted
	// for another stream. If that cannot make room, the writing stream stops spilling
	// (its file is deleted and it keeps its in-memory tail only). A deleted file's path
	// is never reported again.
	BudgetBytes int64
	// Logger receives warnings (default slog.Default()).
	Logger *slog.Logger
}

// Spool owns captured output: a private spill directory (0700) under a root, one
// subdirectory (0700) per owner (a harness session), and the byte budget of every spill
// file in it. Streams made by NewStream keep a bounded in-memory tail and, once that
// overflows, a spill file holding the whole stream (see Capture). The Supervisor
// captures through a Spool of its own; other executors (a remote executor, say) may
// make their own Spool or share the Supervisor's (Supervisor.Spool).
//
// Layout: <Root>/dsh-spill-<pid>-<random>/<owner dir>/<n>[-<stream>].log. Every
// directory and file below Root is created with O_EXCL semantics and opened relative
// to a held descriptor of its parent without following symlinks; before a file is
// created the directories' paths are checked to still name the held directories, so a
// directory replaced by a symlink makes the spill fail (the stream keeps its tail and
// reports no spill path) instead of writing through it. A directory that vanished —
// deleted by a temp cleaner, or moved away: nothing is at its path — is made afresh at
// the next spill, the same way (a new spill directory gets a new name and the instance
// lock); its files are gone, so their paths are withdrawn, and Generation changes. An
// owner's directory is made on its first spill and removed once it holds no file — or,
// made ahead by OwnerDir (for a sandbox to show the owner's commands their own files),
// kept until EndOwner. The spill directory is removed by Close; one left by a dead
// process is removed by the next Spool spilling under the same root.
//
// All methods are safe for concurrent use.
type Spool struct {
	root  string
	limit int64
	used  atomic.Int64 // bytes reserved for spill files; never more than limit
	log   *slog.Logger
	seq   atomic.Uint64

	mu          sync.Mutex
	dir         string // the private spill directory, "" until the first spill
	dirFD       int    // its open descriptor (holding the instance lock), or -1
	dirIno      inode
	dirErr      error         // why the directory cannot be used (for good: it was replaced)
	gen         atomic.Uint64 // Generation: bumped when a vanished directory is made afresh
	owners      map[string]*spoolOwner
	files       map[*spillFile]struct{} // every spill file that exists
	retired     []*spillFile            // complete files of closed streams, oldest first
	reclaimable int64                   // sum of the retired files' sizes
	closed      bool
	// swept: the removal of dead instances' spill directories was started, by the first
	// spill, beside itself, once (Close waits for it: sweeping).
	swept    bool
	sweeping sync.WaitGroup
}

// spoolOwner is one owner's share of the spool: its directory (made on its first
// spill or by OwnerDir, removed once it holds no file and is not kept) and its streams.
type spoolOwner struct {
	id      string
	dirName string
	fd      int   // the open owner directory, or -1
	files   int   // spill files that exist in it
	streams int   // open streams
	ended   bool  // EndOwner was called: files of streams closing now are deleted
	kept    bool  // OwnerDir was called: the directory stays, even empty, until EndOwner
	ino     inode // the directory's identity, to check its path before each new file
}

// spillFile is one spill file. Its path is reported only while it is not gone; once
// gone (deleted, or about to be) it is never reported again.
type spillFile struct {
	path  string
	name  string // within its owner's directory
	owner *spoolOwner
	// size is the bytes reserved for the file in the budget: owned by the stream's
	// writer while it spills, then (once retired) by the spool under its lock.
	size int64
	gone atomic.Bool
	// lost is set (under the spool's lock) when the file's directory vanished: the file
	// went with it, so deleting it only settles the budget.
	lost bool
}

// reportedPath is the path to report for f: "" when there is no file or it is gone.
func (f *spillFile) reportedPath() string {
	if f == nil || f.gone.Load() {
		return ""
	}
	return f.path
}

type inode struct{ dev, ino uint64 }

// NewSpool returns a Spool. Nothing is created on disk until a stream first spills.
func NewSpool(opts SpoolOptions) *Spool {
	sp := &Spool{root: opts.Root, limit: opts.BudgetBytes, log: opts.Logger, dirFD: -1,
		owners: map[string]*spoolOwner{}, files: map[*spillFile]struct{}{}}
	if sp.root == "" {
		sp.root = os.TempDir()
	}
	if sp.limit <= 0 {
		sp.limit = DefaultSpillBudgetBytes
	}
	if sp.log == nil {
		sp.log = slog.Default()
	}
	return sp
}

// NewStream returns an open stream owned by owner ("" = no session), bounded by limits
// (a negative MaxBytes or SpillMaxBytes counts as 0). Its spill file, if it needs one,
// is <spill dir>/<owner dir>/<n>.log. The stream must be closed when it ends.
func (sp *Spool) NewStream(owner string, limits Capture) *Stream {
	return sp.NewNamedStream(owner, limits, strconv.FormatUint(sp.seq.Add(1), 10)+".log")
}

// NewNamedStream is NewStream with the spill file's name chosen by the caller (the
// Supervisor's "<n>-stdout.log"); names must not repeat within the spool, nor take the
// form NewStream gives ("<n>.log").
func (sp *Spool) NewNamedStream(owner string, limits Capture, fileName string) *Stream {
	limits.MaxBytes = max(limits.MaxBytes, 0)
	limits.SpillMaxBytes = max(limits.SpillMaxBytes, 0)
	sp.mu.Lock()
	o := sp.ownerLocked(owner)
	o.streams++
	sp.mu.Unlock()
	return &Stream{limits: limits, sp: sp, owner: o, fileName: fileName}
}

// ownerLocked returns owner's share, creating it; an ended owner starts afresh.
func (sp *Spool) ownerLocked(owner string) *spoolOwner {
	o := sp.owners[owner]
	if o == nil {
		o = &spoolOwner{id: owner, dirName: OwnerDirName(owner), fd: -1}
		sp.owners[owner] = o
	}
	o.ended = false
	return o
}

// OwnerDir makes owner's directory now, unless a spill made it already, and keeps it —
// even when it holds no file — until EndOwner ends the owner. It is for a sandbox that
// shows the owner's commands their own spill files: every spill path reported for
// owner's streams lies directly in this directory, which exists (and is the same
// directory) from now until EndOwner — unless it vanishes (a temp cleaner deletes it):
// then the next spill makes a new one, and Generation changes, which tells the sandbox
// to take it again. It returns the directory, open read-only, named
// by its path (f.Name()); the caller closes it. It is made like every directory of the
// spool (mkdirat, no symlink followed, paths checked) and fails when a spill would.
func (sp *Spool) OwnerDir(owner string) (*os.File, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed {
		return nil, errSpoolClosed
	}
	o, err := sp.ownerDirLocked(sp.ownerLocked(owner))
	if err != nil {
		return nil, err
	}
	o.kept = true
	fd, err := unix.FcntlInt(uintptr(o.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, &opError{op: "dup", path: sp.dir + "/" + o.dirName, err: err}
	}
	return os.NewFile(uintptr(fd), sp.dir+"/"+o.dirName), nil
}

// OwnerDirName is the directory name of an owner (its spill directory, its session
// cgroup): "no-session" for "", "s-<owner>" for a short name of letters, digits, '-'
// and '_', else "h-" and a hash of it.
func OwnerDirName(owner string) string {
	if owner == "" {
		return "no-session"
	}
	if len(owner) <= 64 && strings.Trim(owner, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") == "" {
		return "s-" + owner
	}
	sum := sha256.Sum256([]byte(owner))
	return "h-" + hex.EncodeToString(sum[:16])
}

// Generation changes each time a directory of the spool that vanished (the spill
// directory or an owner's) is made afresh; a caller holding a directory from OwnerDir
// takes it again when Generation is no longer what it was then.
func (sp *Spool) Generation() uint64 { return sp.gen.Load() }

// Root is the directory under which the spill directory is made (SpoolOptions.Root,
// defaulted). A sandbox must keep it out of every root a confined command may write.
func (sp *Spool) Root() string { return sp.root }

// Dir is the private spill directory ("" until the first spill).
func (sp *Spool) Dir() string {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.dir
}

// Used is the total size of the spool's spill files: bytes are counted before they are
// written and uncounted once their file is deleted, so the files on disk never hold
// more, and Used never exceeds Budget.
func (sp *Spool) Used() int64 { return sp.used.Load() }

// Budget is the limit on Used (SpoolOptions.BudgetBytes, defaulted).
func (sp *Spool) Budget() int64 { return sp.limit }

// EndOwner ends an owner (a session ended): its closed streams' spill files are
// deleted now, and those of its streams still open when they close; its directory goes
// once empty. A later NewStream for the same owner starts it afresh.
func (sp *Spool) EndOwner(owner string) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	o := sp.owners[owner]
	if o == nil {
		return
	}
	o.ended = true
	o.kept = false
	kept := sp.retired[:0]
	for _, f := range sp.retired {
		if f.owner == o {
			sp.reclaimable -= f.size
			sp.deleteLocked(f)
		} else {
			kept = append(kept, f)
		}
	}
	clear(sp.retired[len(kept):])
	sp.retired = kept
	sp.forgetOwnerLocked(o)
}

// Close withdraws every spill file (no path is reported any more) and removes the
// spill directory. Streams still open keep their in-memory tails and stop spilling.
// Close is idempotent.
func (sp *Spool) Close() {
	defer sp.sweeping.Wait()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed {
		return
	}
	sp.closed = true
	for f := range sp.files {
		f.gone.Store(true)
	}
	sp.files, sp.retired, sp.reclaimable = nil, nil, 0
	for _, o := range sp.owners {
		if o.fd >= 0 {
			unix.Close(o.fd)
			o.fd = -1
		}
	}
	if sp.dir == "" {
		return
	}
	// Open streams notice the closed spool at their next write (their file is gone).
	if err := os.RemoveAll(sp.dir); err != nil {
		sp.log.Warn("subprocess: cannot remove the spill directory", "err", err)
	} else {
		sp.used.Store(0)
	}
	if sp.dirFD >= 0 {
		unix.Close(sp.dirFD) // releases the instance lock
		sp.dirFD = -1
	}
}

// sweepDeadInstances removes, in the background, the spill directories of dsh
// processes that died under the spool's root, once per Spool (sp.mu held) (a root the size of a busy /tmp takes a
// millisecond or more to list, which the first spill need not wait for).
func (sp *Spool) sweepDeadInstances(rootFD int) {
	if sp.swept { // a directory made afresh (the last one vanished) finds no new dead
		return
	}
	sp.swept = true
	fd, err := unix.FcntlInt(uintptr(rootFD), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return
	}
	sp.sweeping.Add(1)
	go func() {
		defer sp.sweeping.Done()
		defer unix.Close(fd)
		RemoveDeadInstances(fd, spillPrefix, func(name string) {
			_ = os.RemoveAll(filepath.Join(sp.root, name)) // never follows a symlink below root
		})
	}()
}

// tryReserve takes n bytes of the budget if they fit.
func (sp *Spool) tryReserve(n int64) bool {
	for {
		cur := sp.used.Load()
		if cur > sp.limit-n {
			return false
		}
		if sp.used.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// reserve takes n bytes of the budget for a spill write by a stream of owner. When they
// do not fit, retired files are deleted until they do: owner's own, oldest first, then
// other owners', oldest first. Before each deletion it checks that deleting every
// retired file would make room; when it would not, reserve fails without deleting
// more. Writers reserve without the lock, so bytes freed by one deletion may be taken
// by another stream meanwhile: reserve can then delete some files and still fail (the
// bytes went to output that needed them).
func (sp *Spool) reserve(n int64, owner *spoolOwner) bool {
	if sp.tryReserve(n) {
		return true
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for {
		if sp.tryReserve(n) {
			return true
		}
		if len(sp.retired) == 0 || sp.used.Load()-sp.reclaimable > sp.limit-n {
			return false
		}
		i := slices.IndexFunc(sp.retired, func(f *spillFile) bool { return f.owner == owner })
		if i < 0 {
			i = 0
		}
		f := sp.retired[i]
		sp.retired = slices.Delete(sp.retired, i, i+1)
		sp.reclaimable -= f.size
		sp.deleteLocked(f)
	}
}

// release returns n bytes to the budget.
func (sp *Spool) release(n int64) {
	if n != 0 {
		sp.used.Add(-n)
	}
}

// delete removes f's file and returns its bytes to the budget.
func (sp *Spool) delete(f *spillFile) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.deleteLocked(f)
}

// deleteLocked removes f's file (through its owner's directory descriptor, never by
// path) and returns its bytes to the budget. f is marked gone first, so that no reader
// is given its path once the file may be missing. If the file cannot be removed its
// bytes stay reserved: the budget must never undercount the disk. A lost file (its
// directory vanished) is not looked for.
func (sp *Spool) deleteLocked(f *spillFile) {
	f.gone.Store(true)
	if _, exists := sp.files[f]; !exists || sp.closed {
		return
	}
	delete(sp.files, f)
	o := f.owner
	if o.fd >= 0 && !f.lost {
		if err := unix.Unlinkat(o.fd, f.name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			sp.log.Warn("subprocess: cannot remove a spill file", "path", f.path, "err", ErrnoText(err))
			return
		}
	}
	sp.release(f.size)
	o.files--
	sp.forgetOwnerLocked(o)
}

// closeStream records that a stream of o ended; file, when not nil, is its complete
// spill file, which the budget may now delete to make room (at once, if the owner
// ended or the spool is closed).
func (sp *Spool) closeStream(o *spoolOwner, file *spillFile) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	o.streams--
	switch {
	case file == nil:
	case sp.closed:
		file.gone.Store(true)
	case o.ended, file.lost:
		sp.deleteLocked(file)
	default:
		sp.retired = append(sp.retired, file)
		sp.reclaimable += file.size
	}
	sp.forgetOwnerLocked(o)
}

// forgetOwnerLocked removes o's directory once it holds no file (and is not kept), and
// o itself once it has no stream either and has ended.
func (sp *Spool) forgetOwnerLocked(o *spoolOwner) {
	if o.files == 0 && o.fd >= 0 && !o.kept && !sp.closed {
		unix.Close(o.fd)
		o.fd = -1
		// Not through a symlink: unlinkat of a symlink with AT_REMOVEDIR fails.
		if err := unix.Unlinkat(sp.dirFD, o.dirName, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
			sp.log.Warn("subprocess: cannot remove a spill directory", "path", filepath.Join(sp.dir, o.dirName), "err", ErrnoText(err))
		}
	}
	if o.ended && o.streams == 0 && o.files == 0 && sp.owners[o.id] == o {
		delete(sp.owners, o.id)
	}
}

// errSpoolClosed is why a stream of a closed spool does not spill.
var errSpoolClosed = errors.New("subprocess: the spool is closed")

// create makes a spill file for a stream of o: <dir>/<owner dir>/<name>, mode 0600,
// created exclusively through the owner directory's descriptor. Nothing is created when
// a directory's path no longer names the directory the spool holds (it was moved, or
// replaced by a symlink).
func (sp *Spool) create(o *spoolOwner, name string) (*os.File, *spillFile, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed {
		return nil, nil, errSpoolClosed
	}
	if _, err := sp.ownerDirLocked(o); err != nil {
		return nil, nil, err
	}
	ownerPath := sp.dir + "/" + o.dirName
	fd, err := unix.Openat(o.fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		err = &opError{op: "create", path: ownerPath + "/" + name, err: err}
		sp.log.Warn("subprocess: cannot create a spill file; long output keeps its tail only", "err", err)
		return nil, nil, err
	}
	if err := unix.Fchmod(fd, 0o600); err != nil { // the umask may have taken bits
		unix.Close(fd)
		_ = unix.Unlinkat(o.fd, name, 0)
		return nil, nil, err
	}
	path := ownerPath + "/" + name
	o.files++
	f := &spillFile{path: path, name: name, owner: o}
	sp.files[f] = struct{}{}
	return os.NewFile(uintptr(fd), path), f, nil
}

// ownerDirLocked makes sure the spill directory and o's directory exist, are held open
// and are still named by their paths (see create), and returns o. A directory that
// vanished is made afresh; one replaced by something else is refused.
func (sp *Spool) ownerDirLocked(o *spoolOwner) (*spoolOwner, error) {
	if err := sp.spillDirLocked(); err != nil {
		return nil, err
	}
	ownerPath := sp.dir + "/" + o.dirName
	if o.fd >= 0 && vanished(checkDirPath(ownerPath, o.ino)) {
		sp.log.Warn("subprocess: a spill directory was deleted; making a new one", "path", ownerPath)
		sp.abandonLocked(func(x *spoolOwner) bool { return x == o })
	}
	if o.fd < 0 {
		fd, ino, err := makePrivateDir(sp.dirFD, o.dirName, ownerPath, true)
		if err != nil {
			sp.log.Warn("subprocess: cannot create a spill directory; long output keeps its tail only", "err", err)
			return nil, err
		}
		o.fd, o.ino = fd, ino
	}
	if err := checkDirPath(ownerPath, o.ino); err != nil {
		sp.log.Warn("subprocess: a spill directory was moved or replaced; long output keeps its tail only", "err", err)
		return nil, err
	}
	return o, nil
}

// spillDirLocked makes sure the private spill directory exists, is held open and is
// still named by its path. One that vanished is made afresh (initLocked: a new name,
// the instance lock); one replaced by something else (a symlink, another directory) is
// refused for good: every later spill fails at once, and quietly.
func (sp *Spool) spillDirLocked() error {
	if sp.dirFD >= 0 && vanished(checkDirPath(sp.dir, sp.dirIno)) {
		sp.log.Warn("subprocess: the spill directory was deleted; making a new one", "path", sp.dir)
		sp.abandonLocked(func(*spoolOwner) bool { return true })
		unix.Close(sp.dirFD)
		sp.dir, sp.dirFD, sp.dirIno = "", -1, inode{}
	}
	if err := sp.initLocked(); err != nil {
		return err
	}
	if err := checkDirPath(sp.dir, sp.dirIno); err != nil {
		sp.dirErr = err
		sp.log.Warn("subprocess: the spill directory was moved or replaced; long output keeps its tail only", "err", err)
		return err
	}
	return nil
}

// vanished reports whether a checkDirPath error says that nothing is at the path any
// more (the directory was deleted or moved away), rather than something else.
func vanished(err error) bool { return errors.Is(err, unix.ENOENT) }

// abandonLocked forgets the directories of the owners match selects, which vanished
// with their files: every file's path is withdrawn; a closed stream's file leaves the
// budget now, an open stream's once its writer notices (at its next write, or Close).
// The owners get a new directory at their next spill, and Generation changes.
func (sp *Spool) abandonLocked(match func(*spoolOwner) bool) {
	for _, o := range sp.owners {
		if match(o) && o.fd >= 0 {
			unix.Close(o.fd)
			o.fd = -1
		}
	}
	for f := range sp.files {
		if match(f.owner) {
			f.lost = true
			f.gone.Store(true)
		}
	}
	kept := sp.retired[:0]
	for _, f := range sp.retired {
		if f.lost {
			sp.reclaimable -= f.size
			sp.deleteLocked(f)
		} else {
			kept = append(kept, f)
		}
	}
	clear(sp.retired[len(kept):])
	sp.retired = kept
	sp.gen.Add(1)
}

// initLocked creates the private spill directory on first use: a uniquely named 0700
// directory under the root, held open and locked (flock) for the spool's lifetime, so
// that another process can tell a live spool's directory from a dead one's. Leftovers
// of dead processes are removed first.
func (sp *Spool) initLocked() error {
	if sp.dirFD >= 0 || sp.dirErr != nil {
		return sp.dirErr
	}
	err := func() error {
		rootFD, err := unix.Open(sp.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return &opError{op: "open", path: sp.root, err: err}
		}
		defer unix.Close(rootFD)
		sp.sweepDeadInstances(rootFD)
		for range 10 {
			suffix := make([]byte, 6)
			_, _ = rand.Read(suffix)
			name := spillPrefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(suffix)
			path := filepath.Join(sp.root, name)
			fd, ino, err := makePrivateDir(rootFD, name, path, false)
			if errors.Is(err, unix.EEXIST) {
				continue
			}
			if err != nil {
				return err
			}
			if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
				unix.Close(fd)
				_ = unix.Unlinkat(rootFD, name, unix.AT_REMOVEDIR)
				return &opError{op: "lock", path: path, err: err}
			}
			sp.dir, sp.dirFD, sp.dirIno = path, fd, ino
			return nil
		}
		return fmt.Errorf("cannot find a free spill directory name under %s", sp.root)
	}()
	if err != nil {
		sp.dirErr = err
		sp.log.Warn("subprocess: cannot create the spill directory; long output keeps its tail only", "err", err)
	}
	return err
}

// spillPrefix starts the name of every spill directory: dsh-spill-<pid>-<random>.
const spillPrefix = "dsh-spill-"

// makePrivateDir creates the directory name under parentFD (or, with reuse, takes the
// one that exists: an owner directory that could not be removed), opens it without
// following a symlink and makes sure it is a directory of this user with mode 0700.
// path names it in errors.
func makePrivateDir(parentFD int, name, path string, reuse bool) (int, inode, error) {
	created := true
	if err := unix.Mkdirat(parentFD, name, 0o700); err != nil {
		if !reuse || !errors.Is(err, unix.EEXIST) {
			return -1, inode{}, &opError{op: "mkdir", path: path, err: err}
		}
		created = false
	}
	fd, err := unix.Openat(parentFD, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, inode{}, &opError{op: "open", path: path, err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, inode{}, &opError{op: "stat", path: path, err: err}
	}
	if int(st.Uid) != os.Geteuid() || (!created && st.Mode&0o077 != 0) {
		unix.Close(fd)
		return -1, inode{}, fmt.Errorf("spill directory %s is not private to this user (owner %d, mode %#o)", path, st.Uid, st.Mode&0o7777)
	}
	if err := unix.Fchmod(fd, 0o700); err != nil {
		unix.Close(fd)
		return -1, inode{}, &opError{op: "chmod", path: path, err: err}
	}
	return fd, inode{uint64(st.Dev), st.Ino}, nil
}

// checkDirPath checks that path names (without following a final symlink) the
// directory whose identity is want.
func checkDirPath(path string, want inode) error {
	var named unix.Stat_t
	if err := unix.Lstat(path, &named); err != nil {
		return &opError{op: "lstat", path: path, err: err}
	}
	if uint64(named.Dev) != want.dev || named.Ino != want.ino {
		return fmt.Errorf("%s no longer names the spill directory (moved, or replaced by a symlink)", path)
	}
	return nil
}

// opError is a failed operation on a path, worded "<op> <path>: ENOENT (…)"; it unwraps
// to the errno.
type opError struct {
	op, path string
	err      error
}

func (e *opError) Error() string { return e.op + " " + e.path + ": " + ErrnoText(e.err) }
func (e *opError) Unwrap() error { return e.err }
