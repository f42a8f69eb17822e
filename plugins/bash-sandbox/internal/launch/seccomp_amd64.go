//go:build linux

package launch

// sysSeccomp is seccomp(2) on x86-64.
const sysSeccomp = 317

// socketCalls on x86-64: the native socket(2), its x32 variant, and socket(2) of
// 32-bit (i386) programs. (i386's multiplexed socketcall(2) passes its arguments in
// memory, out of a seccomp filter's reach; that gap is documented.)
var socketCalls = []socketCall{
	{auditArchX8664, 41},
	{auditArchX8664, 0x40000000 | 41}, // x32
	{auditArchI386, 359},
}
