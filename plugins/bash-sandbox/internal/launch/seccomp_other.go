//go:build !(linux && (amd64 || arm64))

package launch

import "errors"

// MPTCPFilterSupported: no seccomp filter for this architecture, so a denied network is
// only partially enforced (Multipath TCP stays open) and Enforcement says "partial".
const MPTCPFilterSupported = false

func blockMPTCP() error { return errors.New("not supported on this architecture") }
