package launch

// A plan is the list of operations a box applies to build its world: its mount tree,
// its loopback, then what it masks and keeps read-only. setupPlan computes it from the
// Setup, and updatePlan, before each command, from its Start — both pure functions of
// their message — and the box applies it in one loop (mounts.apply), stopping at the
// first error.
//
// The operations that copy a tree of the host's (clone) come before the pivot, after
// which the host's tree is out of reach; they hold their copies, detached, as numbered
// trees until an attach puts them in place. Every other path is one of the new tree.
type plan []op

// op is one operation of a plan.
type op struct {
	kind opKind
	// path is what the operation acts on: the host path a clone copies, where an
	// attach, a pivot, a mask or a protection takes effect.
	path string
	// tree is the detached tree a clone makes and an attach or a show-spill mounts.
	tree int
	// trees are the device trees a dev mounts (each clone of a device is optional).
	trees []int
	// attrs are the mount attributes of a clone's copy.
	attrs uint64
	// pinned names the descriptor of Setup a clonePinned copies: its directory must
	// still be at path.
	pinned pinnedDir
	// optional: a clone of what the host may lack; without it there is no tree.
	optional bool
	// mkdir: an attach makes its mount point where it is missing (possible only where
	// the tree is writable: the private /tmp).
	mkdir bool
	// root is the innermost writable root holding path (protect, maskDir), "" for
	// none; anchor are the directories strictly between root and path, outermost
	// first, each bound over itself (a mount point cannot be renamed or removed) before
	// path is protected or masked.
	root   string
	anchor []string
	// size is the size in bytes of a tmpfs (the private /tmp, the private /dev/shm of
	// a dev); 0 for the kernel's default.
	size int64
}

// opKind is what an op does.
type opKind uint8

const (
	opPrivate     opKind = iota + 1 // make every mount private: nothing propagates to or from the host
	opClone                         // copy the host's tree at path, submounts too, with attrs, as tree
	opClonePinned                   // copy the directory pinned is open on, which must still be at path
	opAttach                        // mount tree at path (a directory made if missing)
	opPivot                         // make the tree mounted at path the root, and drop the host's
	opBlank                         // mount at path the masks' source: a read-only tmpfs with one empty file
	opDev                           // mount a small /dev at path, with the device trees
	opProc                          // mount a fresh /proc, disable nested user namespaces, make tunables read-only
	opLoopback                      // bring the network namespace's loopback up
	opMaskDir                       // cover the directory path with an empty tmpfs, read-only once sealed
	opMaskCgroups                   // cover every cgroup2 mount with an empty tmpfs, read-only once sealed
	opShowSpill                     // mount tree, the session's spill directory, at path, through the cover holding it
	opSeal                          // make the covering tmpfs mounts read-only
	opProtect                       // bind path read-only over itself
	opMaskFile                      // cover the file path with the empty file
	opCloneFile                     // copy the host's regular file at path (no symlink followed) with attrs, as tree
	opShowFile                      // mount tree, a file of the session's own, at path, through the cover holding it
	opTmpfs                         // mount at path a private tmpfs of size bytes (the private /tmp)
)

// pinnedDir names a descriptor that comes with the Setup.
type pinnedDir uint8

const (
	pinnedWorkspace pinnedDir = iota + 1 // the workspace root pinned at session start
	pinnedSpill                          // the session's spill directory
)

// Mount attributes (struct mount_attr's attr_set), and those of the copies.
const (
	mountAttrRdonly = 0x1
	mountAttrNosuid = 0x2
	mountAttrNodev  = 0x4
	mountAttrNoexec = 0x8

	attrsRootCopy  = mountAttrRdonly | mountAttrNosuid | mountAttrNodev // the host's tree
	attrsWritable  = mountAttrNosuid | mountAttrNodev                   // the private /tmp, the writable roots
	attrsDevice    = mountAttrRdonly | mountAttrNosuid | mountAttrNoexec
	attrsSpillCopy = mountAttrRdonly | mountAttrNosuid | mountAttrNodev | mountAttrNoexec
)

// devices are bound from the host into the box's /dev.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// setupPlan is the plan of the Setup m: nothing without namespaces; in them, the mount
// tree
//
//	/                    the host's tree, read-only, nosuid, nodev (submounts too)
//	/tmp                 the session's private temp dir, read-write: with TmpSize a
//	                     tmpfs of that size, else the host directory TempDir; beneath
//	                     it, where no command reaches, the masks' source
//	/dev                 a small tmpfs: null zero full random urandom tty bound from the
//	                     host, a fresh devpts, a private /dev/shm (of TmpSize, when
//	                     set), the usual symlinks
//	/proc                a fresh procfs of the box's PID namespace (/proc/sys and
//	                     /proc/sysrq-trigger read-only); nested user namespaces are
//	                     disabled through it
//	<workspace>          the pinned workspace root, read-write (mounted from its pinned
//	                     descriptor, so a later rename cannot swap it)
//	<writable roots>     read-write, shorter paths first (a root inside another is
//	                     mounted on top of it)
//
// then, with the network denied, the loopback; then every cgroup v2 mount and the
// masked directories, with the session's spill directory and its shown files
// read-only through them, sealed; the protected paths; the masked files.
//
// The cgroup v2 mounts are masked because a command that can open a cgroup's
// directory can leave its own cgroup: clone3 with CLONE_INTO_CGROUP needs only that
// descriptor and write permission on a cgroup.procs, which neither the read-only mount
// nor Landlock is asked about. With no cgroup directory in sight there is no descriptor
// to give it (the box places commands through the descriptor dsh sends, from the host).
func setupPlan(m *Setup) plan {
	if !m.Namespaces {
		return nil
	}
	var p plan
	trees := 0
	clone := func(o op) int {
		o.tree = trees
		trees++
		p = append(p, o)
		return o.tree
	}
	p = append(p, op{kind: opPrivate, path: "/"})
	spill := -1
	if m.Spill != "" {
		spill = clone(op{kind: opClonePinned, path: m.Spill, pinned: pinnedSpill, attrs: attrsSpillCopy})
	}
	shown := showFiles(m, clone)
	root := clone(op{kind: opClone, path: "/", attrs: attrsRootCopy})
	privateTmp := op{kind: opTmpfs, path: "/tmp", size: m.TmpSize}
	if m.TmpSize == 0 {
		privateTmp = op{kind: opAttach, path: "/tmp", tree: clone(op{kind: opClone, path: m.TempDir, attrs: attrsWritable})}
	}
	var binds []op
	if m.Workspace != "" {
		t := clone(op{kind: opClonePinned, path: m.Workspace, pinned: pinnedWorkspace, attrs: attrsWritable})
		binds = append(binds, op{kind: opAttach, path: m.Workspace, tree: t, mkdir: true})
	}
	for _, w := range m.WritableRoots {
		binds = append(binds, op{kind: opAttach, path: w, tree: clone(op{kind: opClone, path: w, attrs: attrsWritable}), mkdir: true})
	}
	dev := op{kind: opDev, path: "/dev", size: m.TmpSize}
	for _, d := range devices {
		dev.trees = append(dev.trees, clone(op{kind: opClone, path: "/dev/" + d, attrs: attrsDevice, optional: true}))
	}
	p = append(p,
		op{kind: opAttach, path: m.Stage, tree: root},
		op{kind: opPivot, path: m.Stage},
		op{kind: opBlank, path: "/tmp"},
		privateTmp,
		dev,
		op{kind: opProc, path: "/proc"},
	)
	p = append(p, shorterFirst(binds)...)
	if m.Network == NetworkDeny {
		p = append(p, op{kind: opLoopback})
	}
	roots := writableRoots(m)
	p = append(p, op{kind: opMaskCgroups})
	for _, d := range m.MaskDirs {
		r, a := anchors(roots, d)
		p = append(p, op{kind: opMaskDir, path: d, root: r, anchor: a})
	}
	if spill >= 0 {
		p = append(p, op{kind: opShowSpill, path: m.Spill, tree: spill})
	}
	p = append(p, shown...)
	p = append(p, op{kind: opSeal})
	return append(p, updatePlan(roots, nil, m.Protect, m.MaskFiles)...)
}

// updatePlan is the plan run before a command starts, in a box whose writable roots
// are roots: the masked directories, sealed at once; the protected paths; the masked
// files (any may have appeared, or been replaced, since the last time).
func updatePlan(roots, maskDirs, protect, maskFiles []string) plan {
	if len(maskDirs)+len(protect)+len(maskFiles) == 0 {
		return nil
	}
	p := make(plan, 0, len(maskDirs)+1+len(protect)+len(maskFiles))
	for _, d := range maskDirs {
		r, a := anchors(roots, d)
		p = append(p, op{kind: opMaskDir, path: d, root: r, anchor: a})
	}
	if len(maskDirs) > 0 {
		p = append(p, op{kind: opSeal})
	}
	for _, path := range protect {
		r, a := anchors(roots, path)
		p = append(p, op{kind: opProtect, path: path, root: r, anchor: a})
	}
	for _, path := range maskFiles {
		p = append(p, op{kind: opMaskFile, path: path})
	}
	return p
}

// writableRoots are the roots a box of m mounts read-write: the workspace, then the
// writable roots.
func writableRoots(m *Setup) []string {
	return append([]string{m.Workspace}, m.WritableRoots...)
}

// shorterFirst sorts attaches by path length, stably, so that a root inside another is
// mounted on top of it.
func shorterFirst(binds []op) []op {
	for i := 1; i < len(binds); i++ {
		for j := i; j > 0 && len(binds[j].path) < len(binds[j-1].path); j-- {
			binds[j], binds[j-1] = binds[j-1], binds[j]
		}
	}
	return binds
}

// anchors returns the innermost of roots holding path ("" for none) and the
// directories strictly between it and path, outermost first.
func anchors(roots []string, path string) (root string, between []string) {
	for _, r := range roots {
		if r != "" && within(path, r) && len(r) > len(root) {
			root = r
		}
	}
	if root == "" {
		return "", nil
	}
	for dir := parentDir(path); path != root && dir != root && len(dir) > len(root); dir = parentDir(dir) {
		between = append([]string{dir}, between...)
	}
	return root, between
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
