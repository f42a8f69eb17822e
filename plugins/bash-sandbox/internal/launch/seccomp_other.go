//go:build !(linux && (amd64 || arm64))

package launch

// SeccompSupported: no network filter for this architecture; a denied network is then
// only partially enforced and Enforcement says "partial".
const SeccompSupported = false

const sysSeccomp = 0

var filterArches []archCalls
