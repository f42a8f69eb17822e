//go:build linux && (amd64 || arm64)

package launch

import (
	"reflect"
	"syscall"
	"testing"
	"unsafe"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// The box speaks to the kernel with its own constants; they must be the kernel's.
func TestKernelConstants(t *testing.T) {
	eq := func(name string, got, want uint64) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %#x, want %#x", name, got, want)
		}
	}
	eq("SYS_LANDLOCK_CREATE_RULESET", sysLandlockCreateRuleset, unix.SYS_LANDLOCK_CREATE_RULESET)
	eq("SYS_LANDLOCK_ADD_RULE", sysLandlockAddRule, unix.SYS_LANDLOCK_ADD_RULE)
	eq("SYS_LANDLOCK_RESTRICT_SELF", sysLandlockRestrictSelf, unix.SYS_LANDLOCK_RESTRICT_SELF)
	eq("LANDLOCK_CREATE_RULESET_VERSION", landlockCreateRulesetVersion, unix.LANDLOCK_CREATE_RULESET_VERSION)
	eq("LANDLOCK_RULE_PATH_BENEATH", landlockRulePathBeneath, unix.LANDLOCK_RULE_PATH_BENEATH)
	eq("PR_SET_NO_NEW_PRIVS", prSetNoNewPrivs, unix.PR_SET_NO_NEW_PRIVS)
	eq("PR_CAPBSET_DROP", prCapbsetDrop, unix.PR_CAPBSET_DROP)
	eq("PR_SET_SECUREBITS", prSetSecurebits, unix.PR_SET_SECUREBITS)
	eq("PR_CAP_AMBIENT", prCapAmbient, unix.PR_CAP_AMBIENT)
	eq("PR_CAP_AMBIENT_CLEAR_ALL", prCapAmbientClr, unix.PR_CAP_AMBIENT_CLEAR_ALL)
	eq("PR_SET_DUMPABLE", prSetDumpable, unix.PR_SET_DUMPABLE)
	eq("PR_SET_CHILD_SUBREAPER", prSetSubreaper, unix.PR_SET_CHILD_SUBREAPER)
	eq("_LINUX_CAPABILITY_VERSION_3", linuxCapVersion3, unix.LINUX_CAPABILITY_VERSION_3)
	// linux/securebits.h: NOROOT 1<<0, NOROOT_LOCKED 1<<1, NO_SETUID_FIXUP 1<<2 (+ lock
	// 1<<3), KEEP_CAPS_LOCKED 1<<5, NO_CAP_AMBIENT_RAISE 1<<6 (+ lock 1<<7).
	eq("securebits", secureBits, 1<<0|1<<1|1<<2|1<<3|1<<5|1<<6|1<<7)
	eq("CAP_SETPCAP", capSetpcap, unix.CAP_SETPCAP)
	eq("SYS_OPEN_TREE", sysOpenTree, unix.SYS_OPEN_TREE)
	eq("SYS_MOVE_MOUNT", sysMoveMount, unix.SYS_MOVE_MOUNT)
	eq("SYS_MOUNT_SETATTR", sysMountSetattr, unix.SYS_MOUNT_SETATTR)
	eq("SYS_CLOSE_RANGE", 436, unix.SYS_CLOSE_RANGE)
	eq("OPEN_TREE_CLONE", openTreeClone, unix.OPEN_TREE_CLONE)
	eq("AT_EMPTY_PATH", atEmptyPath, unix.AT_EMPTY_PATH)
	eq("AT_RECURSIVE", atRecursive, unix.AT_RECURSIVE)
	eq("MOVE_MOUNT_F_EMPTY_PATH", moveMountFEmpty, unix.MOVE_MOUNT_F_EMPTY_PATH)
	eq("MOUNT_ATTR_RDONLY", mountAttrRdonly, unix.MOUNT_ATTR_RDONLY)
	eq("MOUNT_ATTR_NOSUID", mountAttrNosuid, unix.MOUNT_ATTR_NOSUID)
	eq("MOUNT_ATTR_NODEV", mountAttrNodev, unix.MOUNT_ATTR_NODEV)
	eq("MOUNT_ATTR_NOEXEC", mountAttrNoexec, unix.MOUNT_ATTR_NOEXEC)
	eq("P_PIDFD", pPIDFD, unix.P_PIDFD)
	eq("WNOWAIT", wNowait, unix.WNOWAIT)
	eq("AF_UNIX", afUnix, unix.AF_UNIX)
	eq("AF_INET", afInet, unix.AF_INET)
	eq("AF_INET6", afInet6, unix.AF_INET6)
	eq("AF_NETLINK", afNetlink, unix.AF_NETLINK)
	eq("SOCK_STREAM", sockStream, unix.SOCK_STREAM)
	eq("SYS_IO_URING_SETUP", sysIoUringSetup, unix.SYS_IO_URING_SETUP)
	eq("SYS_IO_URING_ENTER", sysIoUringEnter, unix.SYS_IO_URING_ENTER)
	eq("SYS_IO_URING_REGISTER", sysIoUringRegister, unix.SYS_IO_URING_REGISTER)
	eq("O_PATH", oPath, unix.O_PATH)
	eq("SYS_SECCOMP", sysSeccomp, unix.SYS_SECCOMP)
	eq("AUDIT_ARCH_X86_64", auditArchX8664, unix.AUDIT_ARCH_X86_64)
	eq("AUDIT_ARCH_I386", auditArchI386, unix.AUDIT_ARCH_I386)
	eq("AUDIT_ARCH_AARCH64", auditArchAarch64, unix.AUDIT_ARCH_AARCH64)
	eq("AUDIT_ARCH_ARM", auditArchArm, unix.AUDIT_ARCH_ARM)
	eq("SECCOMP_SET_MODE_FILTER", seccompSetModeFilter, unix.SECCOMP_SET_MODE_FILTER)
	eq("SECCOMP_RET_ERRNO", seccompRetErrno, unix.SECCOMP_RET_ERRNO)
	eq("SECCOMP_RET_ALLOW", seccompRetAllow, unix.SECCOMP_RET_ALLOW)
	eq("IPPROTO_MPTCP", ipprotoMPTCP, unix.IPPROTO_MPTCP)
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"BPF_LD", bpfLd, unix.BPF_LD}, {"BPF_W", bpfW, unix.BPF_W}, {"BPF_ABS", bpfAbs, unix.BPF_ABS},
		{"BPF_JMP", bpfJmp, unix.BPF_JMP}, {"BPF_JEQ", bpfJeq, unix.BPF_JEQ}, {"BPF_K", bpfK, unix.BPF_K},
		{"BPF_RET", bpfRet, unix.BPF_RET}, {"BPF_ALU", bpfAlu, unix.BPF_ALU}, {"BPF_AND", bpfAnd, unix.BPF_AND},
	} {
		eq(c.name, c.got, c.want)
	}
	if unsafe.Sizeof(syscall.SockFilter{}) != unsafe.Sizeof(unix.SockFilter{}) {
		t.Error("SockFilter layout")
	}
	// The socket(2) number of this architecture.
	if filterArches[0].calls[0].nr != unix.SYS_SOCKET || filterArches[0].calls[0].act != actSocket {
		t.Errorf("native socket(2) = %+v, want %d", filterArches[0].calls[0], unix.SYS_SOCKET)
	}

	fs := []uint64{accessFSExecute, accessFSWriteFile, accessFSReadFile, accessFSReadDir, accessFSRemoveDir,
		accessFSRemoveFile, accessFSMakeChar, accessFSMakeDir, accessFSMakeReg, accessFSMakeSock, accessFSMakeFifo,
		accessFSMakeBlock, accessFSMakeSym, accessFSRefer, accessFSTruncate, accessFSIoctlDev, accessFSResolveUnix}
	llfs := []uint64{ll.AccessFSExecute, ll.AccessFSWriteFile, ll.AccessFSReadFile, ll.AccessFSReadDir, ll.AccessFSRemoveDir,
		ll.AccessFSRemoveFile, ll.AccessFSMakeChar, ll.AccessFSMakeDir, ll.AccessFSMakeReg, ll.AccessFSMakeSock, ll.AccessFSMakeFifo,
		ll.AccessFSMakeBlock, ll.AccessFSMakeSym, ll.AccessFSRefer, ll.AccessFSTruncate, ll.AccessFSIoctlDev, ll.AccessFSResolveUnix}
	if !reflect.DeepEqual(fs, llfs) {
		t.Errorf("file access rights %v, want %v", fs, llfs)
	}
	eq("net bind TCP", accessNetBindTCP, ll.AccessNetBindTCP)
	eq("net connect TCP", accessNetConnectTCP, ll.AccessNetConnectTCP)
	eq("net bind UDP", accessNetBindUDP, ll.AccessNetBindUDP)
	eq("net connect/send UDP", accessNetConnectSendUDP, ll.AccessNetConnectSendUDP)
	eq("scope abstract unix", scopeAbstractUnixSocket, ll.ScopeAbstractUnixSocket)
	eq("scope signal", scopeSignal, ll.ScopeSignal)
	eq("log new exec on", restrictSelfLogNewExecOn, ll.FlagRestrictSelfLogNewExecOn)
	if unsafe.Sizeof(rulesetAttr{}) != 24 || unsafe.Offsetof(pathBeneathAttr{}.parentFd) != 8 {
		t.Error("struct layouts")
	}
}

// The ABI table is go-landlock's: V<n> restricts exactly what ABI n supports.
func TestABITable(t *testing.T) {
	for v, cfg := range []landlock.Config{{}, landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5,
		landlock.V6, landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11} {
		sup := supportAt(v)
		if sup.fs != uint64(cfg.HandledAccessFS) || sup.net != uint64(cfg.HandledAccessNet) || sup.scoped != uint64(cfg.Scoped) {
			t.Errorf("ABI %d: %+v, go-landlock %v", v, sup, cfg)
		}
	}
	if supportAt(99) != supportAt(11) || supportAt(-1) != supportAt(0) {
		t.Error("ABIs out of the table")
	}
}

// plan on every ABI: what is handled and what each rule grants.
func TestRuleset(t *testing.T) {
	ro := Policy{Mode: ModeReadOnly, Network: NetworkDeny}
	ww := Policy{Mode: ModeWorkspaceWrite, WorkspaceRoot: "/w", WritableRoots: []string{"/tmp"}, Network: NetworkAllow}
	read := uint64(accessFSExecute | accessFSReadFile | accessFSReadDir)
	rwFile := uint64(accessFSExecute | accessFSReadFile | accessFSWriteFile | accessFSTruncate)
	for abi := 1; abi <= 12; abi++ {
		sup := supportAt(abi)
		// read-only, network denied
		rs := rulesetFor(ro, abi)
		wantScoped := uint64(scopeSignal|scopeAbstractUnixSocket) & sup.scoped
		if rs.attr != (rulesetAttr{handledAccessFS: sup.fs, handledAccessNet: sup.net, scoped: wantScoped}) {
			t.Errorf("ABI %d read-only: attr %+v", abi, rs.attr)
		}
		if abi >= 4 && rs.attr.handledAccessNet&(accessNetBindTCP|accessNetConnectTCP) == 0 {
			t.Errorf("ABI %d: TCP not handled with the network denied", abi)
		}
		wantFlags := uint32(0)
		if abi >= 7 {
			wantFlags = restrictSelfLogNewExecOn
		}
		if rs.flags != wantFlags {
			t.Errorf("ABI %d: flags %#x", abi, rs.flags)
		}
		want := []pathRule{
			{"/", read, false},
			{"/dev/null", rwFile & sup.fs, true}, {"/dev/zero", rwFile & sup.fs, true}, {"/dev/full", rwFile & sup.fs, true}, {"/dev/tty", rwFile & sup.fs, true},
		}
		if !reflect.DeepEqual(rs.rules, want) {
			t.Errorf("ABI %d read-only rules %+v", abi, rs.rules)
		}
		// workspace-write, network allowed
		rs = rulesetFor(ww, abi)
		if rs.attr != (rulesetAttr{handledAccessFS: sup.fs, scoped: scopeSignal & sup.scoped}) {
			t.Errorf("ABI %d workspace-write: attr %+v", abi, rs.attr)
		}
		rw := sup.fs &^ (accessFSIoctlDev | accessFSResolveUnix) // everything but device ioctls and unix sockets
		want = []pathRule{
			{"/", (read | accessFSResolveUnix) & sup.fs, false},
			{"/dev/null", rwFile & sup.fs, true}, {"/dev/zero", rwFile & sup.fs, true}, {"/dev/full", rwFile & sup.fs, true}, {"/dev/tty", rwFile & sup.fs, true},
			{"/w", rw, false}, {"/tmp", rw, false},
		}
		if !reflect.DeepEqual(rs.rules, want) {
			t.Errorf("ABI %d workspace-write rules %+v, want %+v", abi, rs.rules, want)
		}
		if abi >= 2 && rs.rules[5].access&accessFSRefer == 0 {
			t.Errorf("ABI %d: no cross-directory renames in the workspace", abi)
		}
	}
}

// The rules' rights are go-landlock's RODirs, RWFiles and RWDirs.
func TestRightsMatchGoLandlock(t *testing.T) {
	all := landlock.V11.HandledAccessFS
	for _, c := range []struct {
		name string
		got  uint64
		rule landlock.FSRule
	}{
		{"RODirs", accessFSRead, landlock.RODirs("/")},
		{"RWFiles", (accessFSRead | accessFSWrite) & accessFile, landlock.RWFiles("/")},
		{"RWDirs+refer", accessFSRead | accessFSWrite | accessFSRefer, landlock.RWDirs("/").WithRefer()},
	} {
		// FSRule's rights are not exported; its description carries them.
		if want := landlock.PathAccess(landlock.AccessFSSet(c.got)&all, "/").String(); c.rule.String() != want {
			t.Errorf("%s: %s, want %s", c.name, c.rule, want)
		}
	}
}
