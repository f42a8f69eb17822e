package launch

import (
	"errors"
	"syscall"
	"unsafe"
)

// atSymlinkNofollow is AT_SYMLINK_NOFOLLOW for open_tree.
const atSymlinkNofollow = 0x100

// cloneFile copies the mount of the host's file at o.path as tree o.tree, read-only:
// a regular file only, never through a final symbolic link; one the host lacks
// (optional) is left out.
func (ms *mounts) cloneFile(o op) error {
	p, err := syscall.BytePtrFromString(o.path)
	if err != nil {
		return err
	}
	r, _, e := syscall.Syscall(sysOpenTree, uintptr(fdcwd), uintptr(unsafe.Pointer(p)), openTreeClone|openTreeCloexec|atSymlinkNofollow)
	if e == syscall.ENOENT && o.optional {
		return nil
	}
	if e != 0 {
		return errors.New("open_tree " + o.path + ": " + e.Error())
	}
	fd := int(r)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		return errors.New("show " + o.path + ": not a regular file")
	}
	if err := setAttrs(fd, o.attrs); err != nil {
		syscall.Close(fd)
		return errors.New("mount_setattr " + o.path + ": " + err.Error())
	}
	ms.trees[o.tree] = tree{fd, o.path}
	return nil
}

// showFile mounts tree — a file of the session's own, read-only — at path, inside the
// tmpfs covering the masked directory that holds it or, under /tmp, a new one over its
// parent, as the spill directory is (its mount point an empty file made there, where no
// command has been; the cover is sealed read-only with the others). A file elsewhere
// is visible as it is; an absent one (no tree) is not shown. tree is closed.
func (ms *mounts) showFile(tree int, path string) error {
	if tree < 0 {
		return nil
	}
	defer syscall.Close(tree)
	if !within(path, "/tmp") && !ms.covered(path) {
		return nil
	}
	in, err := ms.coverHolding(path, "the session log")
	if err != nil {
		return err
	}
	dirRel, name := splitLast(path[len(in.path)+1:])
	dir, err := mkdirAllAt(in.fd, dirRel)
	if err != nil {
		return errors.New("show " + path + ": mount point: " + err.Error())
	}
	defer syscall.Close(dir)
	f, err := syscall.Openat(dir, name, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o400)
	if err != nil {
		return errors.New("show " + path + ": mount point: " + err.Error())
	}
	syscall.Close(f)
	return moveMount(tree, dir, name, path)
}

// splitLast splits a relative path at its last slash: ("a/b", "c") for "a/b/c", ("",
// "c") for "c".
func splitLast(rel string) (dir, name string) {
	for i := len(rel) - 1; i >= 0; i-- {
		if rel[i] == '/' {
			return rel[:i], rel[i+1:]
		}
	}
	return "", rel
}

// covered reports whether a cover holds path.
func (ms *mounts) covered(path string) bool {
	for _, c := range ms.covers {
		if path != c.path && within(path, c.path) {
			return true
		}
	}
	return false
}
