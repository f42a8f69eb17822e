//go:build linux

package launch

// sysSeccomp is seccomp(2) on arm64.
const sysSeccomp = 277

// SeccompSupported: this architecture has the network filter.
const SeccompSupported = true

// filterArches on arm64: native calls and 32-bit ARM programs.
var filterArches = []archCalls{
	{auditArchAarch64, append([]archCall{{198, actSocket}}, ioUring(0)...)},
	{auditArchArm, append([]archCall{
		{281, actSocket}, // socket
		{102, actEACCES}, // socketcall
	}, ioUring(0)...)},
}
