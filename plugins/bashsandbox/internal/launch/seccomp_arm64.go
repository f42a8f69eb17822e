//go:build linux

package launch

// sysSeccomp is seccomp(2) on arm64.
const sysSeccomp = 277

// SeccompSupported: this architecture has the command filter (seccomp.go).
const SeccompSupported = true

// filterArches on arm64: native calls and 32-bit ARM programs.
var filterArches = []archCalls{
	{auditArchAarch64, calls(
		sockets(198, 199, 201, 206, 211, 269),
		[]archCall{{sysClone3, actClone3}, {29, actIoctl}},
		ioUring(0), keyrings(0, 217),
	)},
	{auditArchArm, calls(
		sockets(281, 288, 284, 290, 296, 374),
		[]archCall{{102, actEACCES}, {sysClone3, actClone3}, {54, actIoctl}}, // socketcall
		ioUring(0), keyrings(0, 309),
	)},
}
