//go:build linux

package launch

// sysSeccomp is seccomp(2) on arm64.
const sysSeccomp = 277

// SeccompSupported: this architecture has the command filter (seccomp.go).
const SeccompSupported = true

// filterArches on arm64: native calls and 32-bit ARM programs.
var filterArches = []archCalls{
	{auditArchAarch64, append([]archCall{{198, actSocket}}, calls(ioUring(0), keyrings(0, 217))...)},
	{auditArchArm, append([]archCall{
		{281, actSocket}, // socket
		{102, actEACCES}, // socketcall
	}, calls(ioUring(0), keyrings(0, 309))...)},
}
