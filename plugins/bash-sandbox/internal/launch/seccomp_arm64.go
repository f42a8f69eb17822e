//go:build linux

package launch

// sysSeccomp is seccomp(2) on arm64.
const sysSeccomp = 277

// socketCalls on arm64: the native socket(2) and socket(2) of 32-bit ARM programs.
var socketCalls = []socketCall{
	{auditArchAarch64, 198},
	{auditArchArm, 281},
}
