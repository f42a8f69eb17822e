//go:build !(linux && (amd64 || arm64))

package launch

// SeccompSupported: no command filter (seccomp.go) for this architecture; enforcement
// is then "partial": a denied network is only partly enforced, and keyrings are not
// filtered.
const SeccompSupported = false

const sysSeccomp = 0

var filterArches []archCalls
