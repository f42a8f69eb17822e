package bashsandbox

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/dsh-dev/dsh/plugins/bashsandbox/internal/launch"
)

// BoxArg is the hidden first argument that turns the dsh binary into a box.
const BoxArg = launch.BoxArg

// LauncherFailureExitCode is the exit status of a launcher that failed before the
// command ran.
const LauncherFailureExitCode = launch.LauncherFailureExitCode

// LauncherFailurePrefix starts the one stderr line a failed launcher writes.
const LauncherFailurePrefix = launch.LauncherFailurePrefix

// Network policies.
const (
	// NetworkDeny forbids every reach outside the sandbox in the confined modes (see
	// docs/sandbox.md). The default.
	NetworkDeny = launch.NetworkDeny
	// NetworkAllow leaves the network unrestricted.
	NetworkAllow = launch.NetworkAllow
)

// dispatched records that this process called MaybeRunLauncher, i.e. that its binary
// dispatches the launcher. Without it, re-executing the binary could run its ordinary
// main (a test binary would even run its tests again, and probe again, recursively), so
// nothing is started.
var dispatched atomic.Bool

// errNotDispatched is the failure of a binary whose main does not dispatch the launcher.
var errNotDispatched = errors.New("bash-sandbox: this binary does not dispatch the sandbox: its main (or TestMain) must call bashsandbox.MaybeRunLauncher first")

var self = sync.OnceValues(func() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("bash-sandbox: locate the dsh binary for the sandbox: %w", err)
	}
	return exe, nil
})

// MaybeRunLauncher runs the launcher — a box, or its failure mode — when this process
// was started as one (os.Args[1] is BoxArg, or FailArg) and never returns in that case. Otherwise it makes this process non-dumpable — a confined
// command must not read the harness's memory or its /proc/<pid>/environ, which holds
// what the commands' environment is scrubbed of — and records that this binary
// dispatches the launcher, which the executor requires. Call it first thing in main (and
// in TestMain, or an init function, of test packages whose tests run confined commands).
//
// In practice the launcher has already run by then: its package dispatches it from its
// init function, before most of the binary's packages are initialised (see
// package launch), which keeps the box small. This call is the contract, and the
// fallback.
func MaybeRunLauncher() {
	launch.Main()
	_ = launch.SetDumpable(false)
	dispatched.Store(true)
}
