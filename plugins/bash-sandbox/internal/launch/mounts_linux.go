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
	sysMountSetattr = 442

	openTreeClone   = 1
	openTreeCloexec = syscall.O_CLOEXEC
	atFdcwd         = -100
	atEmptyPath     = 0x1000
	atRecursive     = 0x8000
	moveMountFEmpty = 0x4

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

// cloneTree returns a detached copy of the mount tree at path (or of dirfd itself when
// path is ""), with its submounts, and sets attrs on all of it.
func cloneTree(dirfd int, path string, attrs uint64) (int, error) {
	flags := uintptr(openTreeClone | openTreeCloexec | atRecursive)
	if path == "" {
		flags |= atEmptyPath
	} else {
		dirfd = fdcwd
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
	p, err := syscall.BytePtrFromString(target)
	if err != nil {
		return err
	}
	empty := [1]byte{}
	_, _, e := syscall.Syscall6(sysMoveMount, uintptr(fd), uintptr(unsafe.Pointer(&empty[0])), uintptr(fdcwd), uintptr(unsafe.Pointer(p)), moveMountFEmpty, 0)
	if e != 0 {
		return errors.New("move_mount " + target + ": " + e.Error())
	}
	return nil
}

// bind is a detached mount tree and where it goes.
type bind struct {
	fd   int
	path string
}

// devices are bound from the host into the sandbox's /dev.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// buildRoot assembles the session's mount tree and makes it the root, in the new mount
// namespace this process was started in:
//
//	/                    the host's tree, read-only, nosuid, nodev (submounts too)
//	/tmp                 the session's private temp dir, read-write
//	/dev                 a small tmpfs: null zero full random urandom tty bound from the
//	                     host, a fresh devpts, a private /dev/shm, the usual symlinks
//	/proc                a fresh procfs of the sandbox's PID namespace (/proc/sys and
//	                     /proc/sysrq-trigger read-only); nested user namespaces are
//	                     disabled through it
//	<workspace>          the pinned workspace root, read-write (mounted from its pinned
//	                     descriptor, so a later rename cannot swap it)
//	<writable roots>     read-write
//
// The caller then covers the hidden directories with an empty read-only tmpfs (hide)
// and makes the protected paths read-only (protect).
func buildRoot(s *Setup, wsfd int) error {
	if err := syscall.Mount("none", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return errors.New("make the mounts private: " + err.Error())
	}
	// Clone every tree first, from the host's view, before anything is attached.
	root, err := cloneTree(0, "/", mountAttrRdonly|mountAttrNosuid|mountAttrNodev)
	if err != nil {
		return err
	}
	tmp, err := cloneTree(0, s.TempDir, mountAttrNosuid|mountAttrNodev)
	if err != nil {
		syscall.Close(root)
		return err
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
		here, err := samePinned(s.Workspace, wsfd)
		if err != nil {
			syscall.Close(root)
			syscall.Close(tmp)
			return err
		}
		fd, err := cloneTree(here, "", mountAttrNosuid|mountAttrNodev)
		syscall.Close(here)
		if err != nil {
			syscall.Close(root)
			syscall.Close(tmp)
			return err
		}
		binds = append(binds, bind{fd, s.Workspace})
	}
	for _, w := range s.WritableRoots {
		fd, err := cloneTree(0, w, mountAttrNosuid|mountAttrNodev)
		if err != nil {
			syscall.Close(root)
			syscall.Close(tmp)
			closeAll()
			return err
		}
		binds = append(binds, bind{fd, w})
	}
	var devs []bind
	for _, d := range devices {
		fd, err := cloneTree(0, "/dev/"+d, mountAttrRdonly|mountAttrNosuid|mountAttrNoexec)
		if err != nil {
			continue // absent on this host: the sandbox has none either
		}
		devs = append(devs, bind{fd, "/dev/" + d})
	}
	// Shorter paths first, so that a root inside another is mounted on top of it.
	for i := 1; i < len(binds); i++ {
		for j := i; j > 0 && len(binds[j].path) < len(binds[j-1].path); j-- {
			binds[j], binds[j-1] = binds[j-1], binds[j]
		}
	}

	fail := func(err error) error {
		for _, b := range binds {
			syscall.Close(b.fd)
		}
		for _, d := range devs {
			syscall.Close(d.fd)
		}
		return err
	}
	if err := attach(root, s.Stage); err != nil {
		syscall.Close(tmp)
		return fail(err)
	}
	if err := pivot(s.Stage); err != nil {
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
	return syscall.Chdir("/")
}

// samePinned opens path (O_PATH) and checks it is the directory pinned is open on.
func samePinned(path string, pinned int) (int, error) {
	fd, err := syscall.Open(path, oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, errors.New("workspace " + path + ": " + err.Error())
	}
	var a, b syscall.Stat_t
	if err := syscall.Fstat(fd, &a); err != nil {
		syscall.Close(fd)
		return -1, errors.New("workspace " + path + ": " + err.Error())
	}
	if err := syscall.Fstat(pinned, &b); err != nil || a.Dev != b.Dev || a.Ino != b.Ino {
		syscall.Close(fd)
		return -1, errors.New("the workspace " + path + " no longer resolves to the directory pinned when the session started")
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

// protector keeps protected paths read-only inside the writable roots.
type protector struct {
	roots []string        // writable roots, as mounted
	done  map[string]bool // paths bound already (protected paths and pinned ancestors)
}

// protect makes path read-only: a read-only bind of it over itself. A path inside a
// writable root whose parent is not that root also gets each ancestor below the root
// bound over itself read-write: a mount point cannot be renamed or removed, so the
// protected file cannot be moved away with its directory and replaced. A path that
// does not exist is skipped (nothing to protect yet); one that is a symbolic link is
// an error (a link cannot be made read-only, and replacing it redirects the path).
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
	if inRoot, err := pr.pinAncestors(path); err != nil || !inRoot {
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

// pinAncestors binds each ancestor of path strictly below the innermost writable root
// holding it over itself (read-write): a mount point cannot be renamed or removed, so
// path cannot be moved away with its directory and something else put in its place.
// It reports whether path lies in a writable root at all.
func (pr *protector) pinAncestors(path string) (bool, error) {
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
		if pr.done[a] {
			continue
		}
		fd, err := cloneTree(0, a, 0)
		if err != nil {
			return true, err
		}
		if err := attach(fd, a); err != nil {
			return true, err
		}
		pr.done[a] = true
	}
	return true, nil
}

// hide covers the directory path with an empty read-only tmpfs, after pinning its
// ancestors inside a writable root (pinAncestors): the server goes on using the host
// path (the spill root, the session directories), which a command must not redirect by
// moving an ancestor away and putting a symlink in its place. A path that does not
// exist is skipped (dsh refuses one that is missing inside a writable root).
func (pr *protector) hide(path string) error {
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	if _, err := pr.pinAncestors(path); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", path, "tmpfs", syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "size=4k,mode=0555"); err != nil {
		return errors.New("hide " + path + ": " + err.Error())
	}
	pr.done[path] = true
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

// loUp brings the loopback interface of the sandbox's network namespace up.
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
