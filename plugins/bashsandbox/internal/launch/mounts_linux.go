package launch

import (
	"errors"
	"os"
	"syscall"
	"unsafe"
)

// The new mount API (the same numbers on every architecture) and its flags.
const (
	sysOpenTree     = 428
	sysMoveMount    = 429
	sysFsopen       = 430
	sysFsconfig     = 431
	sysFsmount      = 432
	sysMountSetattr = 442

	openTreeClone     = 1
	openTreeCloexec   = syscall.O_CLOEXEC
	atFdcwd           = -100
	atEmptyPath       = 0x1000
	atRecursive       = 0x8000
	moveMountFEmpty   = 0x4
	moveMountTEmpty   = 0x40
	fsopenCloexec     = 1
	fsconfigSetString = 1
	fsconfigCmdCreate = 6
	fsmountCloexec    = 1

	mountAttrRdonly = 0x1
	mountAttrNosuid = 0x2
	mountAttrNodev  = 0x4
	mountAttrNoexec = 0x8
)

// fdcwd is AT_FDCWD as a variable (a negative constant cannot become a uintptr).
var fdcwd = atFdcwd

// mountAttr is struct mount_attr.
type mountAttr struct {
	attrSet, attrClr, propagation, userns uint64
}

// cloneTree returns a detached copy of the mount tree at path — absolute, or relative
// to dirfd; dirfd itself when path is "" — with its submounts, and sets attrs on all
// of it.
func cloneTree(dirfd int, path string, attrs uint64) (int, error) {
	flags := uintptr(openTreeClone | openTreeCloexec | atRecursive)
	if path == "" {
		flags |= atEmptyPath
	}
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return -1, err
	}
	fd, _, e := syscall.Syscall(sysOpenTree, uintptr(dirfd), uintptr(unsafe.Pointer(p)), flags)
	if e != 0 {
		return -1, errors.New("open_tree " + displayPath(path) + ": " + e.Error())
	}
	if attrs != 0 {
		if err := setAttrs(int(fd), attrs); err != nil {
			syscall.Close(int(fd))
			return -1, errors.New("mount_setattr " + displayPath(path) + ": " + err.Error())
		}
	}
	return int(fd), nil
}

func displayPath(p string) string {
	if p == "" {
		return "(pinned directory)"
	}
	return p
}

// setAttrs sets attrs on the mount tree fd, recursively.
func setAttrs(fd int, attrs uint64) error {
	a := mountAttr{attrSet: attrs}
	empty := [1]byte{}
	_, _, e := syscall.Syscall6(sysMountSetattr, uintptr(fd), uintptr(unsafe.Pointer(&empty[0])), atEmptyPath|atRecursive, uintptr(unsafe.Pointer(&a)), unsafe.Sizeof(a), 0)
	if e != 0 {
		return e
	}
	return nil
}

// attach mounts the detached tree fd on target (which must exist) and closes fd.
func attach(fd int, target string) error {
	defer syscall.Close(fd)
	return moveMount(fd, fdcwd, target, target)
}

// moveMount mounts the tree fd on the directory (or file) name under dirfd — on dirfd
// itself when name is "" — without following a final symlink; what names the target
// in errors.
func moveMount(fd, dirfd int, name, what string) error {
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return err
	}
	flags := uintptr(moveMountFEmpty)
	if name == "" {
		flags |= moveMountTEmpty
	}
	empty := [1]byte{}
	_, _, e := syscall.Syscall6(sysMoveMount, uintptr(fd), uintptr(unsafe.Pointer(&empty[0])), uintptr(dirfd), uintptr(unsafe.Pointer(p)), flags, 0)
	if e != 0 {
		return errors.New("move_mount " + what + ": " + e.Error())
	}
	return nil
}

// newTmpfs makes a small detached tmpfs (nosuid, nodev, noexec, its root 0755) and
// returns its root, writable until sealed (see protector.seal).
func newTmpfs() (int, error) {
	str := func(s string) uintptr {
		p, _ := syscall.BytePtrFromString(s)
		return uintptr(unsafe.Pointer(p))
	}
	fsfd, _, e := syscall.Syscall(sysFsopen, str("tmpfs"), fsopenCloexec, 0)
	if e != 0 {
		return -1, errors.New("fsopen tmpfs: " + e.Error())
	}
	defer syscall.Close(int(fsfd))
	for _, kv := range [][2]string{{"mode", "0755"}, {"size", "16k"}} {
		if _, _, e := syscall.Syscall6(sysFsconfig, fsfd, fsconfigSetString, str(kv[0]), str(kv[1]), 0, 0); e != 0 {
			return -1, errors.New("fsconfig tmpfs " + kv[0] + ": " + e.Error())
		}
	}
	if _, _, e := syscall.Syscall6(sysFsconfig, fsfd, fsconfigCmdCreate, 0, 0, 0, 0); e != 0 {
		return -1, errors.New("fsconfig tmpfs: " + e.Error())
	}
	fd, _, e := syscall.Syscall(sysFsmount, fsfd, fsmountCloexec, mountAttrNosuid|mountAttrNodev|mountAttrNoexec)
	if e != 0 {
		return -1, errors.New("fsmount tmpfs: " + e.Error())
	}
	return int(fd), nil
}

// bind is a detached mount tree and where it goes.
type bind struct {
	fd   int
	path string
}

// devices are bound from the host into the box's /dev.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// buildRoot assembles the session's mount tree and makes it the root, in the new mount
// namespace this process was started in:
//
//	/                    the host's tree, read-only, nosuid, nodev (submounts too)
//	/tmp                 the session's private temp dir, read-write
//	/dev                 a small tmpfs: null zero full random urandom tty bound from the
//	                     host, a fresh devpts, a private /dev/shm, the usual symlinks
//	/proc                a fresh procfs of the box's PID namespace (/proc/sys and
//	                     /proc/sysrq-trigger read-only); nested user namespaces are
//	                     disabled through it
//	<workspace>          the pinned workspace root, read-write (mounted from its pinned
//	                     descriptor, so a later rename cannot swap it)
//	<writable roots>     read-write
//
// and, beneath the private /tmp where no command reaches it, a read-only tmpfs holding
// one empty file, the source of the masks. It returns that tmpfs's root and, detached,
// a read-only copy of the session's spill directory (spillfd, at s.Spill; -1 for
// none). The caller then masks the directories with an empty tmpfs (maskDir), shows
// the spill directory through them (showSpill), seals them read-only (seal), makes
// the protected paths read-only (protect) and masks the secret files (maskFile).
func buildRoot(s *Setup, wsfd, spillfd int) (spill, blank int, err error) {
	spill, blank, err = buildTree(s, wsfd, spillfd)
	if err != nil {
		closeFD(spill)
		closeFD(blank)
		return -1, -1, err
	}
	return spill, blank, nil
}

func buildTree(s *Setup, wsfd, spillfd int) (spill, blank int, err error) {
	spill, blank = -1, -1
	if err := syscall.Mount("none", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return spill, blank, errors.New("make the mounts private: " + err.Error())
	}
	// Clone every tree first, from the host's view, before anything is attached.
	if s.Spill != "" {
		// Like the workspace: the directory dsh holds, as this namespace sees it.
		here, err := samePinned("the spill directory", s.Spill, spillfd)
		if err != nil {
			return spill, blank, err
		}
		spill, err = cloneTree(here, "", mountAttrRdonly|mountAttrNosuid|mountAttrNodev|mountAttrNoexec)
		syscall.Close(here)
		if err != nil {
			return spill, blank, err
		}
	}
	root, err := cloneTree(0, "/", mountAttrRdonly|mountAttrNosuid|mountAttrNodev)
	if err != nil {
		return spill, blank, err
	}
	tmp, err := cloneTree(0, s.TempDir, mountAttrNosuid|mountAttrNodev)
	if err != nil {
		syscall.Close(root)
		return spill, blank, err
	}
	var binds []bind
	closeAll := func() {
		for _, b := range binds {
			syscall.Close(b.fd)
		}
	}
	if s.Workspace != "" {
		// The pinned descriptor belongs to dsh's mount namespace, whose mounts cannot be
		// cloned from here: clone the same directory as this namespace sees it, after
		// checking it is still the pinned one.
		here, err := samePinned("the workspace", s.Workspace, wsfd)
		if err != nil {
			syscall.Close(root)
			syscall.Close(tmp)
			closeAll()
			return spill, blank, err
		}
		fd, err := cloneTree(here, "", mountAttrNosuid|mountAttrNodev)
		syscall.Close(here)
		if err != nil {
			syscall.Close(root)
			syscall.Close(tmp)
			closeAll()
			return spill, blank, err
		}
		binds = append(binds, bind{fd, s.Workspace})
	}
	for _, w := range s.WritableRoots {
		fd, err := cloneTree(0, w, mountAttrNosuid|mountAttrNodev)
		if err != nil {
			syscall.Close(root)
			syscall.Close(tmp)
			closeAll()
			return spill, blank, err
		}
		binds = append(binds, bind{fd, w})
	}
	var devs []bind
	for _, d := range devices {
		fd, err := cloneTree(0, "/dev/"+d, mountAttrRdonly|mountAttrNosuid|mountAttrNoexec)
		if err != nil {
			continue // absent on this host: the box has none either
		}
		devs = append(devs, bind{fd, "/dev/" + d})
	}
	// Shorter paths first, so that a root inside another is mounted on top of it.
	for i := 1; i < len(binds); i++ {
		for j := i; j > 0 && len(binds[j].path) < len(binds[j-1].path); j-- {
			binds[j], binds[j-1] = binds[j-1], binds[j]
		}
	}

	fail := func(err error) (int, int, error) {
		for _, b := range binds {
			syscall.Close(b.fd)
		}
		for _, d := range devs {
			syscall.Close(d.fd)
		}
		return spill, blank, err
	}
	if err := attach(root, s.Stage); err != nil {
		syscall.Close(tmp)
		return fail(err)
	}
	if err := pivot(s.Stage); err != nil {
		syscall.Close(tmp)
		return fail(err)
	}
	if blank, err = newBlank(); err == nil {
		err = moveMount(blank, fdcwd, "/tmp", "/tmp")
	}
	if err != nil {
		syscall.Close(tmp)
		return fail(err)
	}
	if err := attach(tmp, "/tmp"); err != nil {
		return fail(err)
	}
	if err := mountDev(devs); err != nil {
		devs = nil
		return fail(err)
	}
	devs = nil
	if err := mountProc(); err != nil {
		return fail(err)
	}
	for i, b := range binds {
		if err := ensureDir(b.path); err != nil {
			binds = binds[i:]
			return fail(errors.New("mount point " + b.path + ": " + err.Error()))
		}
		if err := attach(b.fd, b.path); err != nil {
			binds = binds[i+1:]
			return fail(err)
		}
	}
	binds = nil
	return spill, blank, syscall.Chdir("/")
}

// blankName is the empty file in the masks' tmpfs.
const blankName = "empty"

// newBlank makes the masks' source: a detached tmpfs holding one empty file (0400),
// read-only.
func newBlank() (int, error) {
	fd, err := newTmpfs()
	if err != nil {
		return -1, err
	}
	f, err := syscall.Openat(fd, blankName, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, 0o400)
	if err == nil {
		syscall.Close(f)
		err = setAttrs(fd, mountAttrRdonly)
	}
	if err != nil {
		syscall.Close(fd)
		return -1, errors.New("the masks' empty file: " + err.Error())
	}
	return fd, nil
}

func closeFD(fd int) {
	if fd >= 0 {
		syscall.Close(fd)
	}
}

// samePinned opens path (O_PATH) and checks it is the directory pinned is open on;
// what names it in errors ("the workspace").
func samePinned(what, path string, pinned int) (int, error) {
	fd, err := syscall.Open(path, oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, errors.New(what + " " + path + ": " + err.Error())
	}
	var a, b syscall.Stat_t
	if err := syscall.Fstat(fd, &a); err != nil {
		syscall.Close(fd)
		return -1, errors.New(what + " " + path + ": " + err.Error())
	}
	if err := syscall.Fstat(pinned, &b); err != nil || a.Dev != b.Dev || a.Ino != b.Ino {
		syscall.Close(fd)
		if what == "the workspace" {
			return -1, errors.New("the workspace " + path + " no longer resolves to the directory pinned when the session started")
		}
		return -1, errors.New(what + " " + path + " no longer resolves to the directory the server holds")
	}
	return fd, nil
}

// pivot makes the tree mounted at dir the root and detaches the old one.
func pivot(dir string) error {
	if err := syscall.Chdir(dir); err != nil {
		return errors.New("chdir " + dir + ": " + err.Error())
	}
	if err := syscall.PivotRoot(".", "."); err != nil {
		return errors.New("pivot_root: " + err.Error())
	}
	if err := syscall.Unmount(".", syscall.MNT_DETACH); err != nil {
		return errors.New("detach the old root: " + err.Error())
	}
	return syscall.Chdir("/")
}

func mountDev(devs []bind) error {
	closeRest := func(i int) {
		for _, d := range devs[i:] {
			syscall.Close(d.fd)
		}
	}
	if err := syscall.Mount("tmpfs", "/dev", "tmpfs", syscall.MS_NOSUID|syscall.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		closeRest(0)
		return errors.New("mount /dev: " + err.Error())
	}
	for i, d := range devs {
		f, err := os.OpenFile(d.path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
		if err != nil {
			closeRest(i)
			return errors.New("mount point " + d.path + ": " + err.Error())
		}
		f.Close()
		if err := attach(d.fd, d.path); err != nil {
			closeRest(i + 1)
			return err
		}
	}
	if err := os.Mkdir("/dev/pts", 0o755); err != nil {
		return err
	}
	if err := syscall.Mount("devpts", "/dev/pts", "devpts", syscall.MS_NOSUID|syscall.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return errors.New("mount /dev/pts: " + err.Error())
	}
	if err := os.Mkdir("/dev/shm", 0o1777); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", "/dev/shm", "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=1777"); err != nil {
		return errors.New("mount /dev/shm: " + err.Error())
	}
	for name, target := range map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "core": "/proc/kcore",
	} {
		if err := os.Symlink(target, "/dev/"+name); err != nil {
			return err
		}
	}
	// Nothing more is created in /dev itself.
	return remount("/dev", syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NOEXEC)
}

// remount changes the flags of the mount at path (not its submounts).
func remount(path string, flags uintptr) error {
	if err := syscall.Mount("", path, "", syscall.MS_REMOUNT|syscall.MS_BIND|flags, ""); err != nil {
		return errors.New("remount " + path + ": " + err.Error())
	}
	return nil
}

// mountProc mounts a fresh procfs for the PID namespace, forbids nested user
// namespaces (a command could otherwise hold capabilities in one of its own) and
// makes the kernel's tunables read-only.
func mountProc() error {
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return errors.New("mount /proc: " + err.Error())
	}
	if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0\n"), 0); err != nil {
		return errors.New("disable nested user namespaces: " + err.Error())
	}
	for _, p := range []string{"/proc/sys", "/proc/sysrq-trigger"} {
		if _, err := os.Lstat(p); err != nil {
			continue // not shown in this namespace
		}
		fd, err := cloneTree(0, p, mountAttrRdonly|mountAttrNosuid|mountAttrNodev|mountAttrNoexec)
		if err != nil {
			return err
		}
		if err := attach(fd, p); err != nil {
			return err
		}
	}
	return nil
}

// ensureDir makes sure the directory path exists, creating what is missing (possible
// only where the tree is writable: the private /tmp).
func ensureDir(path string) error {
	if fi, err := os.Stat(path); err == nil {
		if !fi.IsDir() {
			return errors.New("not a directory")
		}
		return nil
	}
	return os.MkdirAll(path, 0o755)
}

// protector keeps protected paths read-only inside the writable roots, masks
// directories, shows the session's spill directory and masks secret files.
type protector struct {
	roots    []string        // writable roots, as mounted
	done     map[string]bool // paths protected or masked already
	anchored map[string]bool // ancestors bound over themselves (anchorAncestors)
	covers   []cover         // covering tmpfs mounts not sealed yet
	blank    int             // the masks' tmpfs (see buildRoot)
	blankID  [2]uint64       // the masks' empty file: device and inode
}

// cover is a tmpfs covering a directory, still writable: its root.
type cover struct {
	path string
	fd   int
}

// build masks the directories, shows the spill directory (the detached tree
// spill, -1 for none) through them, seals them, protects the protected paths and masks
// the secrets of m, in the mount tree buildRoot made (blank: the masks' tmpfs, kept).
func (pr *protector) build(m *Setup, spill, blank int) error {
	*pr = protector{roots: append([]string{m.Workspace}, m.WritableRoots...), done: map[string]bool{}, anchored: map[string]bool{}, blank: blank}
	var st syscall.Stat_t
	f, err := syscall.Openat(blank, blankName, oPath|syscall.O_CLOEXEC, 0)
	if err == nil {
		err = syscall.Fstat(f, &st)
		syscall.Close(f)
	}
	if err != nil {
		closeFD(spill)
		return errors.New("the masks' empty file: " + err.Error())
	}
	pr.blankID = [2]uint64{uint64(st.Dev), st.Ino}
	for _, h := range m.MaskDirs {
		if err := pr.maskDir(h); err != nil {
			closeFD(spill)
			return err
		}
	}
	if spill >= 0 {
		if err := pr.showSpill(spill, m.Spill); err != nil {
			return err
		}
	}
	if err := pr.seal(); err != nil {
		return err
	}
	return pr.update(m.Protect, m.MaskFiles)
}

// update protects the protected paths and masks the secrets that need it now (they
// may have appeared, or been replaced, since the last time).
func (pr *protector) update(protect, mask []string) error {
	for _, p := range protect {
		if err := pr.protect(p); err != nil {
			return err
		}
	}
	for _, p := range mask {
		if err := pr.maskFile(p); err != nil {
			return err
		}
	}
	return nil
}

// protect makes path read-only: a read-only bind of it over itself. A path inside a
// writable root whose parent is not that root also gets each ancestor below the root
// bound over itself read-write: a mount point cannot be renamed or removed, so the
// protected file cannot be moved away with its directory and replaced. A path that
// does not exist is skipped (nothing to protect yet); one that is a symbolic link is
// an error (a link cannot be made read-only, and replacing it redirects the path).
// A path that is already an ancestor anchored for another one is still made read-only.
func (pr *protector) protect(path string) error {
	if pr.done[path] {
		return nil
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return nil
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return errors.New("cannot protect " + path + ": it is a symbolic link")
	}
	if inRoot, err := pr.anchorAncestors(path); err != nil || !inRoot {
		return err // outside every writable root: read-only already
	}
	fd, err := cloneTree(0, path, mountAttrRdonly|mountAttrNosuid|mountAttrNodev)
	if err != nil {
		return err
	}
	if err := attach(fd, path); err != nil {
		return err
	}
	pr.done[path] = true
	return nil
}

// anchorAncestors binds each ancestor of path strictly below the innermost writable root
// holding it over itself (read-write): a mount point cannot be renamed or removed, so
// path cannot be moved away with its directory and something else put in its place.
// It reports whether path lies in a writable root at all.
func (pr *protector) anchorAncestors(path string) (bool, error) {
	root := ""
	for _, r := range pr.roots {
		if within(path, r) && len(r) > len(root) {
			root = r
		}
	}
	if root == "" {
		return false, nil
	}
	// Ancestors strictly between the root and path, outermost first.
	var ancestors []string
	for dir := parentDir(path); path != root && dir != root && len(dir) > len(root); dir = parentDir(dir) {
		ancestors = append([]string{dir}, ancestors...)
	}
	for _, a := range ancestors {
		if pr.done[a] || pr.anchored[a] {
			continue // a mount point already
		}
		fd, err := cloneTree(0, a, 0)
		if err != nil {
			return true, err
		}
		if err := attach(fd, a); err != nil {
			return true, err
		}
		pr.anchored[a] = true
	}
	return true, nil
}

// maskDir covers the directory path with an empty tmpfs (read-only once sealed), after
// anchoring its ancestors inside a writable root (anchorAncestors): dsh goes on using
// the host path (the spill root, the session directories), which a command must not
// redirect by moving an ancestor away and putting a symlink in its place. A path that
// does not exist is skipped (dsh refuses one that is missing inside a writable root).
func (pr *protector) maskDir(path string) error {
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	if _, err := pr.anchorAncestors(path); err != nil {
		return err
	}
	fd, err := newTmpfs()
	if err != nil {
		return errors.New("hide " + path + ": " + err.Error())
	}
	if err := moveMount(fd, fdcwd, path, path); err != nil {
		syscall.Close(fd)
		return errors.New("hide " + path + ": " + err.Error())
	}
	pr.covers = append(pr.covers, cover{path, fd})
	pr.done[path] = true
	return nil
}

// showSpill mounts tree — the session's own spill directory, read-only — at path, its
// host path, so that the spill paths in the session's results name files a command can
// read. The mount point is made where no command has been: inside the tmpfs covering
// a masked directory that holds path; or, for a path under /tmp (the private temp dir,
// which commands may write), inside a new tmpfs covering path's parent (the spill
// directory, which then shows this session's directory only). Either tmpfs is sealed
// read-only with the others, so the mount point can be neither moved nor replaced.
// tree is closed.
func (pr *protector) showSpill(tree int, path string) error {
	defer syscall.Close(tree)
	var in *cover
	for i, c := range pr.covers {
		if path != c.path && within(path, c.path) && (in == nil || len(c.path) > len(in.path)) {
			in = &pr.covers[i]
		}
	}
	if in == nil {
		parent := parentDir(path)
		if parent == "/tmp" || !within(parent, "/tmp") {
			return errors.New("show the spill directory " + path + ": it is neither in a hidden directory nor under /tmp")
		}
		tmp, err := syscall.Open("/tmp", oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return errors.New("show the spill directory: /tmp: " + err.Error())
		}
		dir, err := mkdirAllAt(tmp, parent[len("/tmp/"):])
		syscall.Close(tmp)
		if err != nil {
			return errors.New("show the spill directory: mount point " + parent + ": " + err.Error())
		}
		fd, err := newTmpfs()
		if err == nil {
			if err = moveMount(fd, dir, "", parent); err != nil {
				syscall.Close(fd)
			}
		}
		syscall.Close(dir)
		if err != nil {
			return errors.New("show the spill directory: " + err.Error())
		}
		pr.covers = append(pr.covers, cover{parent, fd})
		in = &pr.covers[len(pr.covers)-1]
	}
	dir, err := mkdirAllAt(in.fd, path[len(in.path)+1:])
	if err != nil {
		return errors.New("show the spill directory: mount point " + path + ": " + err.Error())
	}
	defer syscall.Close(dir)
	return moveMount(tree, dir, "", path)
}

// mkdirAllAt makes the directories of the relative path rel under dirfd, as far as
// they are missing, without following a symbolic link, and returns the last (O_PATH).
func mkdirAllAt(dirfd int, rel string) (int, error) {
	fd, err := dupCloexec(dirfd)
	if err != nil {
		return -1, err
	}
	for rel != "" {
		elem := rel
		if i := indexByte(rel, '/'); i >= 0 {
			elem, rel = rel[:i], rel[i+1:]
		} else {
			rel = ""
		}
		if elem == "" || elem == "." || elem == ".." {
			syscall.Close(fd)
			return -1, syscall.EINVAL
		}
		if err := syscall.Mkdirat(fd, elem, 0o755); err != nil && err != syscall.EEXIST {
			syscall.Close(fd)
			return -1, err
		}
		next, err := syscall.Openat(fd, elem, oPath|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		syscall.Close(fd)
		if err != nil {
			return -1, err // a symlink or a file in the way: ELOOP, ENOTDIR
		}
		fd = next
	}
	return fd, nil
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// seal makes the covering tmpfs mounts read-only (their roots 0555), once what shows
// through them is in place.
func (pr *protector) seal() error {
	for _, c := range pr.covers {
		if dir, err := syscall.Openat(c.fd, ".", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0); err == nil {
			_ = syscall.Fchmod(dir, 0o555)
			syscall.Close(dir)
		}
		err := setAttrs(c.fd, mountAttrRdonly)
		syscall.Close(c.fd)
		if err != nil {
			pr.covers = nil
			return errors.New("seal " + c.path + ": mount_setattr: " + err.Error())
		}
	}
	pr.covers = nil
	return nil
}

// mask covers the file at path with an empty read-only file: a secret of the harness
// (its HTTP bearer token) that a command could otherwise read. Nothing at path, a
// directory or a symbolic link is left alone, and so is a file masked already — but
// one replaced since it was masked (a rename over a mount point in another namespace
// detaches the mount) is masked again.
func (pr *protector) maskFile(path string) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return nil
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR, syscall.S_IFLNK:
		return nil
	}
	if [2]uint64{uint64(st.Dev), st.Ino} == pr.blankID {
		return nil
	}
	fd, err := cloneTree(pr.blank, blankName, mountAttrRdonly|mountAttrNosuid|mountAttrNodev|mountAttrNoexec)
	if err != nil {
		return errors.New("mask " + path + ": " + err.Error())
	}
	if err := attach(fd, path); err != nil {
		return errors.New("mask " + path + ": " + err.Error())
	}
	return nil
}

// within reports whether path is root or lies beneath it.
func within(path, root string) bool {
	return path == root || root == "/" || len(path) > len(root) && path[len(root)] == '/' && path[:len(root)] == root
}

func parentDir(p string) string {
	i := len(p) - 1
	for i > 0 && p[i] != '/' {
		i--
	}
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// loUp brings the loopback interface of the box's network namespace up.
func loUp() error {
	s, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return errors.New("loopback: " + err.Error())
	}
	defer syscall.Close(s)
	var ifr [40]byte // struct ifreq
	copy(ifr[:], "lo")
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(s), syscall.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return errors.New("loopback: SIOCGIFFLAGS: " + e.Error())
	}
	flags := (*uint16)(unsafe.Pointer(&ifr[16]))
	*flags |= syscall.IFF_UP
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(s), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return errors.New("loopback: SIOCSIFFLAGS: " + e.Error())
	}
	return nil
}
