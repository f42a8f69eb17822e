//go:build linux

package launch

import (
	"errors"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"unsafe"
)

// Landlock system calls (the same numbers on every architecture) and the other kernel
// interfaces the launcher uses.
const (
	sysLandlockCreateRuleset = 444
	sysLandlockAddRule       = 445
	sysLandlockRestrictSelf  = 446

	landlockCreateRulesetVersion = 1 << 0
	landlockRulePathBeneath      = 1

	prSetNoNewPrivs = 38
	oPath           = 0o10000000
)

var kernelABI = sync.OnceValue(func() int {
	v, _, errno := syscall.Syscall(sysLandlockCreateRuleset, 0, 0, landlockCreateRulesetVersion)
	if errno != 0 || int(v) < 0 {
		return 0
	}
	return int(v)
})

// KernelABI is the Landlock ABI version of the running kernel (0 when Landlock is
// unavailable). It only queries the kernel; nothing is restricted.
func KernelABI() int { return kernelABI() }

// pathBeneathAttr is struct landlock_path_beneath_attr (packed: 12 bytes, which are the
// first 12 of this struct).
type pathBeneathAttr struct {
	allowedAccess uint64
	parentFd      int32
	_             int32
}

// confine restricts the calling OS thread — which then execs the command, so the
// command inherits the restriction — to p (see plan), sets no_new_privs on it first
// (Landlock and seccomp require it), and, with the network denied, installs the
// seccomp filter that makes socket(2) with IPPROTO_MPTCP fail with EACCES, since
// Landlock does not restrict Multipath TCP. It locks the goroutine to its thread for
// good: the caller must exec from the same goroutine, right after.
//
// Only this thread is restricted: the exec replaces the whole process with it, and no
// other thread runs anything but the Go runtime in between.
func confine(p Policy) error {
	abi := KernelABI()
	if abi < 1 {
		return errors.New("Landlock is not available on this kernel (it needs Linux 5.13 or newer with Landlock enabled)")
	}
	rs := plan(p, abi)
	fd, _, errno := syscall.Syscall(sysLandlockCreateRuleset, uintptr(unsafe.Pointer(&rs.attr)), unsafe.Sizeof(rs.attr), 0)
	if errno != 0 {
		return errors.New("landlock: create the ruleset (ABI " + strconv.Itoa(abi) + "): " + errno.Error())
	}
	defer syscall.Close(int(fd))
	for _, r := range rs.rules {
		if r.access == 0 {
			continue
		}
		if err := addPathRule(int(fd), r); err != nil {
			if r.ignoreMissing && errors.Is(err, syscall.ENOENT) {
				continue
			}
			return errors.New("landlock: " + r.path + ": " + err.Error())
		}
	}
	runtime.LockOSThread() // never unlocked: this thread execs the command
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); errno != 0 {
		return errors.New("prctl(PR_SET_NO_NEW_PRIVS): " + errno.Error())
	}
	if _, _, errno := syscall.RawSyscall(sysLandlockRestrictSelf, fd, uintptr(rs.flags), 0); errno != 0 {
		return errors.New("landlock: restrict: " + errno.Error())
	}
	if p.Network == NetworkDeny && MPTCPFilterSupported {
		if err := blockMPTCP(); err != nil {
			return errors.New("seccomp: " + err.Error())
		}
	}
	return nil
}

func addPathRule(rulesetFd int, r pathRule) error {
	fd, err := syscall.Open(r.path, oPath|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	attr := pathBeneathAttr{allowedAccess: r.access, parentFd: int32(fd)}
	_, _, errno := syscall.Syscall6(sysLandlockAddRule, uintptr(rulesetFd), landlockRulePathBeneath, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	runtime.KeepAlive(&attr)
	if errno != 0 {
		return errno
	}
	return nil
}
