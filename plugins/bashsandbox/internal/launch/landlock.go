package launch

// Enforcement values (shell.SandboxFacts.Enforcement).
const (
	EnforcementFull    = "full"
	EnforcementPartial = "partial"
)

// writableDevices are the only files read-only mode may write: pseudo-devices that
// discard or produce bytes and cannot hold data, and /dev/tty, which opens the
// caller's own controlling terminal — the terminal the box allocated for a command run
// with one, nothing (ENXIO) for the others, which have none. /dev/pts/* is left out on
// purpose: a confined command must not type into someone's terminal. Writes to
// /dev/stdout, /dev/stderr and /dev/fd/N reach the command's own pipes or terminal,
// which Landlock does not restrict.
var writableDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty"}

// Landlock access rights, scopes and flags (include/uapi/linux/landlock.h).
const (
	accessFSExecute = 1 << iota
	accessFSWriteFile
	accessFSReadFile
	accessFSReadDir
	accessFSRemoveDir
	accessFSRemoveFile
	accessFSMakeChar
	accessFSMakeDir
	accessFSMakeReg
	accessFSMakeSock
	accessFSMakeFifo
	accessFSMakeBlock
	accessFSMakeSym
	accessFSRefer       // ABI 2
	accessFSTruncate    // ABI 3
	accessFSIoctlDev    // ABI 5
	accessFSResolveUnix // ABI 9
)

const (
	accessNetBindTCP        = 1 << iota // ABI 4
	accessNetConnectTCP                 // ABI 4
	accessNetBindUDP                    // ABI 10
	accessNetConnectSendUDP             // ABI 10
)

const (
	scopeAbstractUnixSocket = 1 << iota // ABI 6
	scopeSignal                         // ABI 6
)

const (
	restrictSelfLogSameExecOff   = 1 << iota // ABI 7
	restrictSelfLogNewExecOn                 // ABI 7
	restrictSelfLogSubdomainsOff             // ABI 7
)

// The rights the box grants (the same groups as go-landlock's RODirs, RWFiles and
// RWDirs).
const (
	accessFSRead  = accessFSExecute | accessFSReadFile | accessFSReadDir
	accessFSWrite = accessFSWriteFile | accessFSRemoveDir | accessFSRemoveFile | accessFSMakeChar |
		accessFSMakeDir | accessFSMakeReg | accessFSMakeSock | accessFSMakeFifo | accessFSMakeBlock |
		accessFSMakeSym | accessFSTruncate
	accessFile = accessFSExecute | accessFSWriteFile | accessFSTruncate | accessFSReadFile
)

// abiSupport is what one Landlock ABI version can restrict.
type abiSupport struct {
	fs, net, scoped, flags uint64
}

// abiSupports, indexed by ABI version (as go-landlock's table; a newer kernel is
// treated as the newest version known here).
var abiSupports = [...]abiSupport{
	0:  {},
	1:  {fs: 1<<13 - 1},
	2:  {fs: 1<<14 - 1},
	3:  {fs: 1<<15 - 1},
	4:  {fs: 1<<15 - 1, net: 1<<2 - 1},
	5:  {fs: 1<<16 - 1, net: 1<<2 - 1},
	6:  {fs: 1<<16 - 1, net: 1<<2 - 1, scoped: 1<<2 - 1},
	7:  {fs: 1<<16 - 1, net: 1<<2 - 1, scoped: 1<<2 - 1, flags: 1<<3 - 1},
	8:  {fs: 1<<16 - 1, net: 1<<2 - 1, scoped: 1<<2 - 1, flags: 1<<4 - 1},
	9:  {fs: 1<<17 - 1, net: 1<<2 - 1, scoped: 1<<2 - 1, flags: 1<<4 - 1},
	10: {fs: 1<<17 - 1, net: 1<<4 - 1, scoped: 1<<2 - 1, flags: 1<<4 - 1},
	11: {fs: 1<<17 - 1, net: 1<<4 - 1, scoped: 1<<2 - 1, flags: 1<<5 - 1},
}

func supportAt(abi int) abiSupport {
	if abi < 0 {
		abi = 0
	}
	if abi >= len(abiSupports) {
		abi = len(abiSupports) - 1
	}
	return abiSupports[abi]
}

// rulesetAttr is struct landlock_ruleset_attr.
type rulesetAttr struct {
	handledAccessFS  uint64
	handledAccessNet uint64
	scoped           uint64
}

// pathRule grants access beneath path.
type pathRule struct {
	path          string
	access        uint64
	ignoreMissing bool
}

// ruleset is what confine asks the kernel for.
type ruleset struct {
	attr  rulesetAttr
	rules []pathRule
	flags uint32 // landlock_restrict_self flags
}

// plan computes the ruleset that confines p on a kernel with Landlock ABI abi (≥ 1):
// every file access right the kernel knows is handled (best effort down to the running
// ABI), and then granted:
//   - everywhere: read files, list directories, execute (and, with the network
//     allowed, connect to pathname UNIX sockets, ABI 9+);
//   - /dev/null, /dev/zero, /dev/full, /dev/tty (if present): read and write;
//   - workspace-write only: everything, including cross-directory renames and links
//     (ABI 2+), under the workspace root and the writable roots.
//
// Device ioctls (ABI 5+) are granted nowhere. With the network denied, TCP bind and
// connect (ABI 4+; UDP too from ABI 10) are handled and granted nowhere, and
// connections to abstract UNIX sockets outside the sandbox are denied (ABI 6+);
// allowed, the network is not handled at all. Signals to processes outside the sandbox
// are always denied (ABI 6+). Denials of the executed command reach the audit log where
// audit is enabled (ABI 7+).
func rulesetFor(p Policy, abi int) ruleset {
	sup := supportAt(abi)
	rs := ruleset{attr: rulesetAttr{handledAccessFS: sup.fs, scoped: scopeSignal}}
	if p.Network == NetworkDeny {
		rs.attr.handledAccessNet = sup.net
		rs.attr.scoped |= scopeAbstractUnixSocket
	}
	rs.attr.scoped &= sup.scoped
	rs.flags = uint32(restrictSelfLogNewExecOn & sup.flags)
	handled := rs.attr.handledAccessFS
	readAll := uint64(accessFSRead)
	if p.Network == NetworkAllow {
		readAll |= accessFSResolveUnix
	}
	rs.rules = append(rs.rules, pathRule{path: "/", access: readAll & handled})
	for _, dev := range writableDevices {
		rs.rules = append(rs.rules, pathRule{path: dev, access: (accessFSRead | accessFSWrite) & accessFile & handled, ignoreMissing: true})
	}
	if p.Mode == ModeWorkspaceWrite {
		// Refer is handled from ABI 2 on; below it the kernel simply forbids
		// cross-directory renames and links.
		rw := uint64(accessFSRead|accessFSWrite|accessFSRefer) & handled
		for _, root := range append([]string{p.WorkspaceRoot}, p.WritableRoots...) {
			rs.rules = append(rs.rules, pathRule{path: root, access: rw})
		}
	}
	return rs
}
