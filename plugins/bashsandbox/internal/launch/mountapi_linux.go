package launch

import (
	"errors"
	"os"
	"strconv"
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
		return &syscallError{"move_mount " + what, e}
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

// mountTmpfs mounts a private tmpfs of size bytes at dir (nosuid, nodev, sticky and
// writable by all, as /tmp is): filling it fails with ENOSPC, not the host's disk.
func mountTmpfs(dir string, size int64) error {
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=1777"+sizeOption(size)); err != nil {
		return errors.New("mount " + dir + ": " + err.Error())
	}
	return nil
}

// sizeOption is a tmpfs's size option for size bytes ("" for the kernel's default).
func sizeOption(size int64) string {
	if size <= 0 {
		return ""
	}
	return ",size=" + strconv.FormatInt(size, 10)
}

// mountDev mounts a small tmpfs at dir (/dev) with the device trees devs, each at its
// host path (in dir), a fresh devpts, a private shm (of shmSize bytes; 0: the kernel's
// default, half the memory) and the usual symlinks, and makes it read-only. It closes
// every tree of devs.
func mountDev(dir string, devs []tree, shmSize int64) error {
	closeRest := func(i int) {
		for _, d := range devs[i:] {
			syscall.Close(d.fd)
		}
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		closeRest(0)
		return errors.New("mount " + dir + ": " + err.Error())
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
	if err := os.Mkdir(dir+"/pts", 0o755); err != nil {
		return err
	}
	if err := syscall.Mount("devpts", dir+"/pts", "devpts", syscall.MS_NOSUID|syscall.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return errors.New("mount " + dir + "/pts: " + err.Error())
	}
	if err := os.Mkdir(dir+"/shm", 0o1777); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", dir+"/shm", "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=1777"+sizeOption(shmSize)); err != nil {
		return errors.New("mount " + dir + "/shm: " + err.Error())
	}
	for name, target := range map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "core": "/proc/kcore",
	} {
		if err := os.Symlink(target, dir+"/"+name); err != nil {
			return err
		}
	}
	// Nothing more is created in /dev itself.
	return remount(dir, syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NOEXEC)
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

// syscallError is "<op>: <errno>", the errno kept for errors.Is.
type syscallError struct {
	op    string
	errno syscall.Errno
}

func (e *syscallError) Error() string { return e.op + ": " + e.errno.Error() }
func (e *syscallError) Unwrap() error { return e.errno }
