package bashsandbox

import "github.com/dsh-dev/dsh/plugins/bash-sandbox/internal/launch"

// EnforcementFor exposes the ABI → enforcement rule to the black-box tests, so older
// kernels can be reasoned about on this one.
var EnforcementFor = launch.EnforcementFor

// MPTCPFilterSupported reports whether this build carries the MPTCP seccomp filter.
const MPTCPFilterSupported = launch.MPTCPFilterSupported

// SetDispatched pretends this binary does (or does not) dispatch the launcher and forgets
// the cached probe; the returned function restores both.
func SetDispatched(v bool) (restore func()) {
	prev := dispatched.Swap(v)
	probe.mu.Lock()
	cached := probe.result
	probe.result = nil
	probe.mu.Unlock()
	return func() {
		dispatched.Store(prev)
		probe.mu.Lock()
		probe.result = cached
		probe.mu.Unlock()
	}
}
