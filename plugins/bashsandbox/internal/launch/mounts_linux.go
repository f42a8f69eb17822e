package launch

import (
	"errors"
	"os"
	"strconv"
	"syscall"
)

// mounts is what a box's plans work on: the detached trees a plan's clones made, the
// masks' source, the covering tmpfs mounts not sealed yet, and what is protected,
// masked or anchored already. The box applies its setup plan, then each command's
// update plan, to the same mounts.
type mounts struct {
	pinned   map[pinnedDir]int    // the Setup's descriptors
	trees    map[int]tree         // by number, until mounted
	done     map[string]bool      // paths protected or masked already
	anchored map[string]bool      // ancestors bound over themselves
	covers   []cover              // covering tmpfs mounts not sealed yet
	masked   map[string][2]uint64 // masked directories: their cover's root, device and inode
	blank    int                  // the masks' tmpfs root
	blankID  [2]uint64            // the masks' empty file: device and inode
}

// tree is a detached copy of a tree of the host's, and where it was.
type tree struct {
	fd   int
	path string
}

// cover is a tmpfs covering a directory, still writable: its root.
type cover struct {
	path string
	fd   int
}

// newMounts returns the mounts of a box whose Setup came with the descriptors pinned.
func newMounts(pinned map[pinnedDir]int) *mounts {
	return &mounts{pinned: pinned, trees: map[int]tree{}, done: map[string]bool{}, anchored: map[string]bool{},
		masked: map[string][2]uint64{}, blank: -1}
}

// apply applies p, operation by operation, and stops at the first error. The trees
// it cloned and did not mount are closed on return.
func (ms *mounts) apply(p plan) error {
	defer ms.dropTrees()
	for _, o := range p {
		if err := ms.do(o); err != nil {
			return err
		}
	}
	return nil
}

// do applies one operation (see opKind).
func (ms *mounts) do(o op) error {
	switch o.kind {
	case opPrivate:
		if err := syscall.Mount("none", o.path, "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
			return errors.New("make the mounts private: " + err.Error())
		}
		return nil
	case opClone:
		return ms.clone(o)
	case opClonePinned:
		return ms.clonePinned(o)
	case opAttach:
		return ms.attach(o)
	case opPivot:
		return pivot(o.path)
	case opBlank:
		return ms.mountBlank(o.path)
	case opDev:
		return ms.mountDev(o)
	case opTmpfs:
		return mountTmpfs(o.path, o.size)
	case opProc:
		return mountProc()
	case opLoopback:
		return loUp()
	case opMaskDir:
		return ms.maskDir(o)
	case opMaskCgroups:
		return ms.maskCgroups()
	case opShowSpill:
		return ms.showSpill(ms.take(o.tree), o.path)
	case opSeal:
		return ms.seal()
	case opProtect:
		return ms.protect(o)
	case opMaskFile:
		return ms.maskFile(o.path)
	case opCloneFile:
		return ms.cloneFile(o)
	case opShowFile:
		return ms.showFile(ms.take(o.tree), o.path)
	}
	return errors.New("unknown plan operation " + strconv.Itoa(int(o.kind)))
}

// clone copies the host's tree at o.path as tree o.tree; an optional one the host
// lacks is left out.
func (ms *mounts) clone(o op) error {
	fd, err := cloneTree(0, o.path, o.attrs)
	if err != nil {
		if o.optional {
			return nil // absent on this host: the box has none either
		}
		return err
	}
	ms.trees[o.tree] = tree{fd, o.path}
	return nil
}

// clonePinned copies the directory a pinned descriptor is open on. The descriptor
// belongs to dsh's mount namespace, whose mounts cannot be cloned from here: clone the
// same directory as this namespace sees it, after checking it is still the pinned one.
func (ms *mounts) clonePinned(o op) error {
	what := "the workspace"
	if o.pinned == pinnedSpill {
		what = "the spill directory"
	}
	here, err := samePinned(what, o.path, ms.pinned[o.pinned])
	if err != nil {
		return err
	}
	fd, err := cloneTree(here, "", o.attrs)
	syscall.Close(here)
	if err != nil {
		return err
	}
	ms.trees[o.tree] = tree{fd, o.path}
	return nil
}

// take hands over tree n, which the caller closes (or mounts); -1 for none.
func (ms *mounts) take(n int) int {
	t, ok := ms.trees[n]
	if !ok {
		return -1
	}
	delete(ms.trees, n)
	return t.fd
}

// attach mounts tree o.tree at o.path, making the mount point first where o.mkdir
// says it may be missing.
func (ms *mounts) attach(o op) error {
	if o.mkdir {
		if err := ensureDir(o.path); err != nil {
			return errors.New("mount point " + o.path + ": " + err.Error())
		}
	}
	fd := ms.take(o.tree)
	if fd < 0 {
		return errors.New("attach " + o.path + ": no tree " + strconv.Itoa(o.tree))
	}
	return attach(fd, o.path)
}

// mountBlank mounts the masks' source at path and keeps its root, and the identity of
// its empty file (a file masked already is that file).
func (ms *mounts) mountBlank(path string) error {
	fd, err := newBlank()
	if err != nil {
		return err
	}
	ms.blank = fd
	if err := moveMount(fd, fdcwd, path, path); err != nil {
		return err
	}
	var st syscall.Stat_t
	f, err := syscall.Openat(fd, blankName, oPath|syscall.O_CLOEXEC, 0)
	if err == nil {
		err = syscall.Fstat(f, &st)
		syscall.Close(f)
	}
	if err != nil {
		return errors.New("the masks' empty file: " + err.Error())
	}
	ms.blankID = [2]uint64{uint64(st.Dev), st.Ino}
	return nil
}

// mountDev mounts a small /dev at o.path with the device trees the host had, each
// where it was on the host.
func (ms *mounts) mountDev(o op) error {
	var devs []tree
	for _, n := range o.trees {
		if t, ok := ms.trees[n]; ok {
			delete(ms.trees, n)
			devs = append(devs, t)
		}
	}
	return mountDev(o.path, devs, o.size)
}

// dropTrees closes the trees that were cloned and not mounted.
func (ms *mounts) dropTrees() {
	for n, t := range ms.trees {
		syscall.Close(t.fd)
		delete(ms.trees, n)
	}
}

// protect makes o.path read-only: a read-only bind of it over itself. A path inside a
// writable root whose parent is not that root also gets each ancestor below the root
// anchored first (o.anchor): a mount point cannot be renamed or removed, so the
// protected file cannot be moved away with its directory and replaced. A path that
// does not exist is skipped (nothing to protect yet); one that is a symbolic link is
// an error (a link cannot be made read-only, and replacing it redirects the path); one
// outside every writable root is read-only already. A path that is already an ancestor
// anchored for another one is still made read-only.
func (ms *mounts) protect(o op) error {
	path := o.path
	if ms.done[path] {
		return nil
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return nil
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return errors.New("cannot protect " + path + ": it is a symbolic link")
	}
	if o.root == "" {
		return nil // outside every writable root: read-only already
	}
	if err := ms.anchor(o.anchor); err != nil {
		return err
	}
	fd, err := cloneTree(0, path, mountAttrRdonly|mountAttrNosuid|mountAttrNodev)
	if err != nil {
		return err
	}
	if err := attach(fd, path); err != nil {
		return err
	}
	ms.done[path] = true
	return nil
}

// anchor binds each of dirs over itself (read-write), unless it is a mount point
// already: a mount point cannot be renamed or removed, so what lies beneath cannot be
// moved away with its directory and something else put in its place.
func (ms *mounts) anchor(dirs []string) error {
	for _, a := range dirs {
		if ms.done[a] || ms.anchored[a] {
			continue
		}
		fd, err := cloneTree(0, a, 0)
		if err != nil {
			return err
		}
		if err := attach(fd, a); err != nil {
			return err
		}
		ms.anchored[a] = true
	}
	return nil
}

// maskDir covers the directory o.path with an empty tmpfs (read-only once sealed),
// after anchoring its ancestors inside a writable root (o.anchor): dsh goes on using
// the host path (the spill root, the session directories), which a command must not
// redirect by moving an ancestor away and putting a symlink in its place. A path that
// does not exist is skipped (dsh refuses one that is missing inside a writable root),
// and so is one masked already — but one replaced since it was masked (a rename or
// rmdir in another namespace detaches the mount) is masked again.
func (ms *mounts) maskDir(o op) error {
	path := o.path
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return nil
	}
	if id, ok := ms.masked[path]; ok && id == [2]uint64{uint64(st.Dev), st.Ino} {
		return nil
	}
	if err := ms.anchor(o.anchor); err != nil {
		return err
	}
	fd, err := newTmpfs()
	if err != nil {
		return errors.New("hide " + path + ": " + err.Error())
	}
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return errors.New("hide " + path + ": " + err.Error())
	}
	if err := moveMount(fd, fdcwd, path, path); err != nil {
		syscall.Close(fd)
		if errors.Is(err, syscall.ENOENT) && syscall.Stat(path, &st) == syscall.ENOENT {
			return nil // removed since the Stat (another dsh ended): skipped as if missing
		}
		return errors.New("hide " + path + ": " + err.Error())
	}
	ms.covers = append(ms.covers, cover{path, fd})
	ms.done[path] = true
	ms.masked[path] = [2]uint64{uint64(st.Dev), st.Ino}
	return nil
}

// maskCgroups covers each cgroup v2 mount of this mount namespace with an empty tmpfs
// (read-only once sealed), the innermost last.
func (ms *mounts) maskCgroups() error {
	points, err := cgroup2Mounts()
	if err != nil {
		return errors.New("hide the cgroup file systems: " + err.Error())
	}
	for _, p := range points {
		if err := ms.maskDir(op{kind: opMaskDir, path: p}); err != nil {
			return err
		}
	}
	return nil
}

// cgroup2Mounts are the mount points of the cgroup v2 file systems of this mount
// namespace (/proc/self/mountinfo), shorter paths first.
func cgroup2Mounts() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for rest := string(b); rest != ""; {
		line := rest
		if i := indexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		if point, fstype := mountinfoFields(line); fstype == "cgroup2" && point != "" {
			out = append(out, point)
		}
	}
	for i := 1; i < len(out); i++ { // shorter first: a mount inside another is covered after it
		for j := i; j > 0 && len(out[j]) < len(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}

// mountinfoFields returns the mount point (field 5, unescaped) and the file system
// type (the first field after " - ") of one /proc/self/mountinfo line.
func mountinfoFields(line string) (point, fstype string) {
	var fields []string
	sep := -1
	for line != "" {
		for line != "" && line[0] == ' ' {
			line = line[1:]
		}
		i := indexByte(line, ' ')
		if i < 0 {
			i = len(line)
		}
		if i > 0 {
			if line[:i] == "-" && sep < 0 {
				sep = len(fields)
			}
			fields = append(fields, line[:i])
		}
		line = line[i:]
	}
	if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
		return "", ""
	}
	return unescapeMountinfo(fields[4]), fields[sep+1]
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space…).
func unescapeMountinfo(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			out = append(out, (s[i+1]-'0')<<6|(s[i+2]-'0')<<3|(s[i+3]-'0'))
			i += 3
			continue
		}
		out = append(out, s[i])
	}
	return string(out)
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// showSpill mounts tree — the session's own spill directory, read-only — at path, its
// host path, so that the spill paths in the session's results name files a command can
// read. The mount point is made where no command has been: inside the tmpfs covering
// a masked directory that holds path; or, for a path under /tmp (the private temp dir,
// which commands may write), inside a new tmpfs covering path's parent (the spill
// directory, which then shows this session's directory only). Either tmpfs is sealed
// read-only with the others, so the mount point can be neither moved nor replaced.
// tree is closed.
func (ms *mounts) showSpill(tree int, path string) error {
	defer syscall.Close(tree)
	in, err := ms.coverHolding(path, "the spill directory")
	if err != nil {
		return err
	}
	dir, err := mkdirAllAt(in.fd, path[len(in.path)+1:])
	if err != nil {
		return errors.New("show the spill directory: mount point " + path + ": " + err.Error())
	}
	defer syscall.Close(dir)
	return moveMount(tree, dir, "", path)
}

// coverHolding returns the innermost cover holding path, making one over path's parent
// when path is under /tmp (the private temp dir) and in no cover; what names path in
// errors ("the spill directory").
func (ms *mounts) coverHolding(path, what string) (*cover, error) {
	var in *cover
	for i, c := range ms.covers {
		if path != c.path && within(path, c.path) && (in == nil || len(c.path) > len(in.path)) {
			in = &ms.covers[i]
		}
	}
	if in != nil {
		return in, nil
	}
	parent := parentDir(path)
	if parent == "/tmp" || !within(parent, "/tmp") {
		return nil, errors.New("show " + what + " " + path + ": it is neither in a hidden directory nor under /tmp")
	}
	tmp, err := syscall.Open("/tmp", oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, errors.New("show " + what + ": /tmp: " + err.Error())
	}
	dir, err := mkdirAllAt(tmp, parent[len("/tmp/"):])
	syscall.Close(tmp)
	if err != nil {
		return nil, errors.New("show " + what + ": mount point " + parent + ": " + err.Error())
	}
	fd, err := newTmpfs()
	if err == nil {
		if err = moveMount(fd, dir, "", parent); err != nil {
			syscall.Close(fd)
		}
	}
	syscall.Close(dir)
	if err != nil {
		return nil, errors.New("show " + what + ": " + err.Error())
	}
	ms.covers = append(ms.covers, cover{parent, fd})
	return &ms.covers[len(ms.covers)-1], nil
}

// seal makes the covering tmpfs mounts read-only (their roots 0555), once what shows
// through them is in place.
func (ms *mounts) seal() error {
	for _, c := range ms.covers {
		if dir, err := syscall.Openat(c.fd, ".", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0); err == nil {
			_ = syscall.Fchmod(dir, 0o555)
			syscall.Close(dir)
		}
		err := setAttrs(c.fd, mountAttrRdonly)
		syscall.Close(c.fd)
		if err != nil {
			ms.covers = nil
			return errors.New("seal " + c.path + ": mount_setattr: " + err.Error())
		}
	}
	ms.covers = nil
	return nil
}

// maskFile covers the file at path with an empty read-only file: a secret of the harness
// (its HTTP bearer token) that a command could otherwise read. Nothing at path, a
// directory or a symbolic link is left alone, and so is a file masked already — but
// one replaced since it was masked (a rename over a mount point in another namespace
// detaches the mount) is masked again.
func (ms *mounts) maskFile(path string) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return nil
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR, syscall.S_IFLNK:
		return nil
	}
	if [2]uint64{uint64(st.Dev), st.Ino} == ms.blankID {
		return nil
	}
	fd, err := cloneTree(ms.blank, blankName, mountAttrRdonly|mountAttrNosuid|mountAttrNodev|mountAttrNoexec)
	if err != nil {
		return errors.New("mask " + path + ": " + err.Error())
	}
	if err := attach(fd, path); err != nil {
		return errors.New("mask " + path + ": " + err.Error())
	}
	return nil
}
