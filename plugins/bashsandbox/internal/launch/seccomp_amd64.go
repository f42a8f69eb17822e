//go:build linux

package launch

// sysSeccomp is seccomp(2) on x86-64.
const sysSeccomp = 317

// SeccompSupported: this architecture has the command filter (seccomp.go).
const SeccompSupported = true

// filterArches on x86-64: native calls, x32 calls (the same numbers with bit 30 set,
// under the x86-64 audit arch) and 32-bit (i386) programs.
var filterArches = []archCalls{
	{auditArchX8664, append([]archCall{
		{41, actSocket},                 // socket
		{x32SyscallBit | 41, actSocket}, // x32 socket
	}, calls(ioUring(0), ioUring(x32SyscallBit), keyrings(0, 248), keyrings(x32SyscallBit, 248))...)},
	{auditArchI386, append([]archCall{
		{359, actSocket}, // socket
		{102, actEACCES}, // socketcall
	}, calls(ioUring(0), keyrings(0, 286))...)},
}
