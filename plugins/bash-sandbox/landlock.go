package bashsandbox

import "github.com/dsh-dev/dsh/plugins/bash-sandbox/internal/launch"

// Enforcement values (the result of Enforcement, and shell.SandboxFacts.Enforcement).
const (
	// EnforcementFull: the host enforces everything the policy promises.
	EnforcementFull = launch.EnforcementFull
	// EnforcementPartial: an older kernel enforces only part of the policy.
	EnforcementPartial = launch.EnforcementPartial
)

// kernelABI is the Landlock ABI version of the running kernel (0 when Landlock is
// unavailable). It only queries the kernel; nothing is restricted.
func kernelABI() int { return launch.KernelABI() }

// RequiredABI is the lowest Landlock ABI that enforces everything p promises: the file
// rules need ABI 3 (truncate(2) is restricted from ABI 3 on), a denied network ABI 4
// (TCP connect and bind).
func RequiredABI(p LaunchPolicy) int { return launch.RequiredABI(p) }

// Enforcement says how completely the running host enforces p: "full" when the kernel's
// Landlock ABI reaches RequiredABI(p) (and, with the network denied, the launcher can
// also block Multipath TCP, which Landlock does not cover), "partial" when only part of
// the policy is enforced, "" for a policy that is not a confined mode.
func Enforcement(p LaunchPolicy) string { return launch.Enforcement(p) }
