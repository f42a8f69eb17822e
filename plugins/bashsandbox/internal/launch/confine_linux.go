package launch

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"unsafe"
)

// Landlock system calls (the same numbers on every architecture) and the other kernel
// interfaces the box uses.
const (
	sysLandlockCreateRuleset = 444
	sysLandlockAddRule       = 445
	sysLandlockRestrictSelf  = 446

	landlockCreateRulesetVersion = 1 << 0
	landlockRulePathBeneath      = 1

	prCapbsetDrop    = 24
	prSetSecurebits  = 28
	prSetNoNewPrivs  = 38
	prCapAmbient     = 47
	prCapAmbientClr  = 4
	prSetDumpable    = 4
	prSetSubreaper   = 36
	linuxCapVersion3 = 0x20080522
	oPath            = 0o10000000

	// SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP, SECBIT_KEEP_CAPS_LOCKED and
	// SECBIT_NO_CAP_AMBIENT_RAISE, each with its lock.
	secureBits = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
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

// capHeader and capData are the capget/capset structures (version 3: two data words).
type capHeader struct {
	version uint32
	pid     int32
}

type capData struct {
	effective, permitted, inheritable uint32
}

// newRuleset creates the Landlock ruleset of p and adds its rules. pinned maps a root
// path to an already open directory (the workspace pinned at session start), which is
// used instead of opening the path again. The caller closes the returned descriptor.
func newRuleset(p Policy, pinned map[string]int) (fd int, flags uint32, err error) {
	abi := KernelABI()
	if abi < 1 {
		return -1, 0, errors.New("Landlock is not available on this kernel (it needs Linux 5.13 or newer with Landlock enabled)")
	}
	rs := rulesetFor(p, abi)
	r, _, errno := syscall.Syscall(sysLandlockCreateRuleset, uintptr(unsafe.Pointer(&rs.attr)), unsafe.Sizeof(rs.attr), 0)
	if errno != 0 {
		return -1, 0, errors.New("landlock: create the ruleset (ABI " + strconv.Itoa(abi) + "): " + errno.Error())
	}
	fd = int(r)
	for _, rule := range rs.rules {
		if rule.access == 0 {
			continue
		}
		if err := addPathRule(fd, rule, pinned[rule.path]); err != nil {
			if rule.ignoreMissing && errors.Is(err, syscall.ENOENT) {
				continue
			}
			syscall.Close(fd)
			return -1, 0, errors.New("landlock: " + rule.path + ": " + err.Error())
		}
	}
	return fd, rs.flags, nil
}

func addPathRule(rulesetFd int, r pathRule, pinned int) error {
	fd := pinned
	if fd <= 0 {
		var err error
		fd, err = syscall.Open(r.path, oPath|syscall.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer syscall.Close(fd)
	}
	attr := pathBeneathAttr{allowedAccess: r.access, parentFd: int32(fd)}
	_, _, errno := syscall.Syscall6(sysLandlockAddRule, uintptr(rulesetFd), landlockRulePathBeneath, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	runtime.KeepAlive(&attr)
	if errno != 0 {
		return errno
	}
	return nil
}

// prepareThread locks the calling goroutine to its OS thread for good (the thread dies
// with the goroutine) and takes from that thread everything a command must not have,
// whatever its policy: no_new_privs; the securebits that stop root from regaining
// capabilities at exec, the bounding set emptied and the ambient set cleared (when
// dropCaps: this needs CAP_SETPCAP, which the box holds in its user namespace, or
// as root); no capabilities at all. The thread then starts one command, after
// restrictThread: the child inherits the thread's credentials and Landlock domain, which
// are per-thread (and the seccomp filter, which filterProcess put on every thread).
// The box prepares spare threads ahead of the commands: emptying the bounding set
// takes a credential change per capability.
func prepareThread(dropCaps bool, lastCap int) error {
	runtime.LockOSThread() // never unlocked
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); e != 0 {
		return errors.New("prctl(PR_SET_NO_NEW_PRIVS): " + e.Error())
	}
	if dropCaps {
		if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetSecurebits, secureBits, 0, 0, 0, 0); e != 0 {
			return errors.New("prctl(PR_SET_SECUREBITS): " + e.Error())
		}
		for c := 0; c <= lastCap; c++ {
			if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapbsetDrop, uintptr(c), 0, 0, 0, 0); e != 0 {
				return errors.New("prctl(PR_CAPBSET_DROP, " + strconv.Itoa(c) + "): " + e.Error())
			}
		}
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClr, 0, 0, 0, 0); e != 0 && e != syscall.EINVAL {
		return errors.New("prctl(PR_CAP_AMBIENT_CLEAR_ALL): " + e.Error())
	}
	hdr := capHeader{version: linuxCapVersion3}
	var data [2]capData
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return errors.New("capset: " + e.Error())
	}
	return nil
}

// restrictThread puts the calling (prepared) thread in a new Landlock domain of ruleset:
// one per command, so commands cannot signal or trace each other.
func restrictThread(ruleset int, flags uint32) error {
	if _, _, e := syscall.RawSyscall(sysLandlockRestrictSelf, uintptr(ruleset), uintptr(flags), 0); e != 0 {
		return errors.New("landlock: restrict: " + e.Error())
	}
	return nil
}

// filterProcess installs filter on every thread of this process (SECCOMP_FILTER_FLAG_TSYNC),
// after setting no_new_privs, which the kernel then sets on every thread too. Threads
// made later inherit it from the thread that makes them.
func filterProcess(filter []syscall.SockFilter) error {
	const seccompFilterFlagTsync = 1
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); e != 0 {
		return errors.New("prctl(PR_SET_NO_NEW_PRIVS): " + e.Error())
	}
	prog := syscall.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	r, _, e := syscall.RawSyscall(sysSeccomp, seccompSetModeFilter, seccompFilterFlagTsync, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(filter)
	if e != 0 {
		return e
	}
	if r != 0 {
		return errors.New("thread " + strconv.Itoa(int(r)) + " could not be synchronised")
	}
	return nil
}

// holdsCap reports whether the calling thread has capability c in its effective set.
func holdsCap(c int) bool {
	hdr := capHeader{version: linuxCapVersion3}
	var data [2]capData
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return false
	}
	return data[c/32].effective&(1<<(c%32)) != 0
}

// lastCapability is the highest capability number this kernel knows.
func lastCapability() int {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err == nil {
		n := 0
		for _, c := range b {
			if c >= '0' && c <= '9' {
				n = n*10 + int(c-'0')
			}
		}
		if n > 0 && n < 64 {
			return n
		}
	}
	return 40 // CAP_CHECKPOINT_RESTORE, the last one as of Linux 6.x
}

// SetDumpable makes the calling process dumpable or not. A process that is not
// dumpable cannot be traced, and its /proc files (environ, mem, fd…) are readable only
// with CAP_SYS_PTRACE, whatever the uid.
func SetDumpable(on bool) error {
	v := uintptr(0)
	if on {
		v = 1
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetDumpable, v, 0, 0, 0, 0); e != 0 {
		return e
	}
	return nil
}

// rulesets are the Landlock rulesets of a box's commands, made once per distinct
// policy and kept (a ruleset may restrict any number of threads; each restriction is a
// domain of its own, so commands still cannot signal or trace each other).
type rulesets struct {
	mu     sync.Mutex
	pinned map[string]int // the pinned workspace root's descriptor, by path
	byKey  map[string]cachedRuleset
}

type cachedRuleset struct {
	fd    int
	flags uint32
}

// get returns the ruleset of p.
func (c *rulesets) get(p Policy) (int, uint32, error) {
	key := p.Mode + "\x00" + p.WorkspaceRoot + "\x00" + p.Network
	for _, r := range p.WritableRoots {
		key += "\x00" + r
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.byKey[key]; ok {
		return r.fd, r.flags, nil
	}
	fd, flags, err := newRuleset(p, c.pinned)
	if err != nil {
		return -1, 0, err
	}
	if c.byKey == nil {
		c.byKey = map[string]cachedRuleset{}
	}
	c.byKey[key] = cachedRuleset{fd, flags}
	return fd, flags, nil
}
