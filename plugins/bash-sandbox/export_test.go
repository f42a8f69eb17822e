package bashsandbox

import "github.com/dsh-dev/dsh/plugins/bash-sandbox/internal/launch"

// Internals the black-box tests check directly.
var (
	CheckBackend         = checkBackend
	Facts                = sandboxFacts
	KernelABI            = kernelABI
	NewResolver          = newResolver
	PolicyPrompt         = policyPrompt
	PromptSection        = promptSection
	DefaultSandboxConfig = defaultSandboxConfig
)

// Remedy is the sentence the fail-closed error carries (SPEC §8 "plus what to do").
const Remedy = remedy

// EnforcementFor exposes the ABI → enforcement rule to the black-box tests, so older
// kernels can be reasoned about on this one.
var EnforcementFor = launch.EnforcementFor

// MPTCPFilterSupported reports whether this build carries the MPTCP seccomp filter.
const MPTCPFilterSupported = launch.MPTCPFilterSupported

// ForceUnavailable makes Probe report the backend as not usable, with reason, until the
// returned restore function is called: the fail-closed path on any host.
func ForceUnavailable(reason string) (restore func()) {
	probe.mu.Lock()
	defer probe.mu.Unlock()
	prev := probe.override
	probe.override = &ProbeResult{Backend: BackendLandlock, ABI: kernelABI(), Reason: reason}
	return func() {
		probe.mu.Lock()
		defer probe.mu.Unlock()
		probe.override = prev
	}
}

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
