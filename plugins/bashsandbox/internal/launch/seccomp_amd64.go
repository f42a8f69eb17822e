//go:build linux

package launch

// sysSeccomp is seccomp(2) on x86-64.
const sysSeccomp = 317

// SeccompSupported: this architecture has the command filter (seccomp.go).
const SeccompSupported = true

// filterArches on x86-64: native calls, x32 calls (the same numbers with bit 30 set,
// under the x86-64 audit arch; x32 has sendmsg and sendmmsg of its own, 518 and 538,
// and the native numbers are filtered too in case a kernel accepts them) and 32-bit
// (i386) programs.
var filterArches = []archCalls{
	{auditArchX8664, calls(
		sockets(41, 53, 50, 44, 46, 307),
		sockets(x32SyscallBit|41, x32SyscallBit|53, x32SyscallBit|50, x32SyscallBit|44, x32SyscallBit|518, x32SyscallBit|538),
		[]archCall{{x32SyscallBit | 46, actSendFlags2}, {x32SyscallBit | 307, actSendFlags3}},
		[]archCall{{sysClone3, actClone3}, {x32SyscallBit | sysClone3, actClone3}},
		[]archCall{{16, actIoctl}, {x32SyscallBit | 16, actIoctl}, {x32SyscallBit | 514, actIoctl}},
		ioUring(0), ioUring(x32SyscallBit), keyrings(0, 248), keyrings(x32SyscallBit, 248),
	)},
	{auditArchI386, calls(
		sockets(359, 360, 363, 369, 370, 345),
		[]archCall{{102, actEACCES}, {sysClone3, actClone3}, {54, actIoctl}}, // socketcall
		ioUring(0), keyrings(0, 286),
	)},
}
