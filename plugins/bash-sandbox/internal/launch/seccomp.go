//go:build linux && (amd64 || arm64)

package launch

import (
	"syscall"
	"unsafe"
)

// MPTCPFilterSupported: this architecture has the seccomp filter that closes Landlock's
// Multipath TCP gap.
const MPTCPFilterSupported = true

// socketCall is one (audit arch, syscall number) pair that creates a socket.
type socketCall struct {
	arch uint32
	nr   uint32
}

// Kernel constants (linux/audit.h, linux/seccomp.h, linux/filter.h, linux/in.h).
const (
	auditArchX8664   = 0xc000003e
	auditArchI386    = 0x40000003
	auditArchAarch64 = 0xc00000b7
	auditArchArm     = 0x40000028

	seccompSetModeFilter = 1
	seccompRetErrno      = 0x00050000
	seccompRetAllow      = 0x7fff0000

	bpfLd  = 0x00
	bpfW   = 0x00
	bpfAbs = 0x20
	bpfJmp = 0x05
	bpfJeq = 0x10
	bpfK   = 0x00
	bpfRet = 0x06

	ipprotoMPTCP = 262
)

// seccomp_data offsets: nr (u32), arch (u32), instruction_pointer (u64), args[6] (u64);
// args[2] (the protocol, an int) is compared on its low 32 bits, which come first on
// little-endian machines.
const (
	offNr       = 0
	offArch     = 4
	offArg2Low  = 16 + 2*8
	seccompDeny = seccompRetErrno | uint32(syscall.EACCES)
)

// blockMPTCP installs, on the calling thread (which then execs the command), a seccomp
// filter under which socket(2) with protocol IPPROTO_MPTCP fails with EACCES and every
// other system call is unaffected. Landlock's TCP rules do not cover Multipath TCP
// sockets, which would otherwise let a confined command connect or listen despite
// network "deny". Requires no_new_privs on the thread (confine sets it).
func blockMPTCP() error {
	prog := mptcpFilter(socketCalls)
	fprog := syscall.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := syscall.RawSyscall(sysSeccomp, seccompSetModeFilter, 0, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return errno
	}
	return nil
}

// mptcpFilter assembles the classic BPF program: for each socket-creating call, a
// matching arch and number leads to the protocol check; everything else is allowed.
func mptcpFilter(calls []socketCall) []syscall.SockFilter {
	stmt := func(code uint16, k uint32) syscall.SockFilter { return syscall.SockFilter{Code: code, K: k} }
	jeq := func(k uint32, jt, jf uint8) syscall.SockFilter {
		return syscall.SockFilter{Code: bpfJmp | bpfJeq | bpfK, K: k, Jt: jt, Jf: jf}
	}
	ldw := func(off uint32) syscall.SockFilter { return stmt(bpfLd|bpfW|bpfAbs, off) }
	// Layout: per call 4 instructions [ld arch; jeq arch; ld nr; jeq nr], then
	// check: [ld arg2; jeq MPTCP], deny: [ret errno], allow: [ret allow].
	n := len(calls)
	checkAt := 4 * n
	denyAt := checkAt + 2
	allowAt := denyAt + 1
	var prog []syscall.SockFilter
	for i, c := range calls {
		base := 4 * i
		next := base + 4 // the next call's block (or the check block for the last call)
		if i == n-1 {
			next = allowAt
		}
		prog = append(prog,
			ldw(offArch),
			jeq(c.arch, 0, uint8(next-(base+2))),
			ldw(offNr),
			jeq(c.nr, uint8(checkAt-(base+4)), uint8(next-(base+4))),
		)
	}
	prog = append(prog,
		ldw(offArg2Low),
		jeq(ipprotoMPTCP, 0, 1),
		stmt(bpfRet|bpfK, seccompDeny),
		stmt(bpfRet|bpfK, seccompRetAllow),
	)
	return prog
}
