package bashsandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/plugins/shell"
)

// BackendLandlock names the only backend so far.
const BackendLandlock = "landlock"

// ProbeResult says whether a sandbox backend works on this host.
type ProbeResult struct {
	// Usable: the launcher confined a real command here.
	Usable bool
	// Backend is the backend that was probed ("landlock").
	Backend string
	// ABI is the kernel's Landlock ABI version (0 when absent).
	ABI int
	// Reason says why the backend is not usable; empty when it is.
	Reason string
}

var probe struct {
	mu       sync.Mutex
	result   *ProbeResult
	override *ProbeResult
}

// probeTimeout bounds the probe's one launcher run (generous: the host may be busy).
const probeTimeout = 30 * time.Second

// probeOK is what the probe command prints when its write was refused.
const probeOK = "dsh-sandbox-probe-ok"

// Probe reports whether the Landlock backend works on this host. The first call runs the
// launcher once, read-only with the network denied, on a command that must fail to
// create a file in a fresh temporary directory; later calls return the cached result.
// So a kernel without Landlock, a binary whose main does not dispatch the launcher, or a
// launcher that runs but does not confine are all "not usable" — and executors fail
// closed (see UnavailableError).
func Probe() ProbeResult {
	probe.mu.Lock()
	defer probe.mu.Unlock()
	if probe.override != nil {
		return *probe.override
	}
	if probe.result == nil {
		r := runProbe()
		probe.result = &r
	}
	return *probe.result
}

func runProbe() ProbeResult {
	res := ProbeResult{Backend: BackendLandlock, ABI: kernelABI()}
	fail := func(format string, args ...any) ProbeResult {
		res.Reason = fmt.Sprintf(format, args...)
		return res
	}
	if res.ABI < 1 {
		return fail("the kernel offers no Landlock ABI")
	}
	if !dispatched.Load() {
		return fail("%v", errNotDispatched)
	}
	dir, err := os.MkdirTemp("", "dsh-sandbox-probe-")
	if err != nil {
		return fail("create the probe directory: %v", err)
	}
	defer os.RemoveAll(dir)
	script := `if : > "$1/written" 2>/dev/null; then echo unconfined; exit 3; fi; echo ` + probeOK
	argv, err := LauncherArgv(LaunchPolicy{Mode: shell.ModeReadOnly, Network: NetworkDeny}, []string{"bash", "-c", script, "bash", dir})
	if err != nil {
		return fail("%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C"}
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	out := strings.TrimSpace(stdout.String())
	errLine := strings.TrimSpace(stderr.String())
	switch {
	case runErr == nil && out == probeOK:
		res.Usable = true
		return res
	case ctx.Err() != nil:
		return fail("the launcher did not finish within %s", probeTimeout)
	case strings.HasPrefix(errLine, RunnerFailurePrefix):
		return fail("the launcher failed: %s", strings.TrimPrefix(errLine, RunnerFailurePrefix))
	case out == "unconfined":
		return fail("the launcher ran the command but Landlock did not confine it")
	}
	var ee *exec.ExitError
	if errors.As(runErr, &ee) || runErr == nil {
		return fail("the launcher did not confirm confinement: %s; stdout: %q; stderr: %q", cmd.ProcessState, truncate(out, 200), truncate(errLine, 200))
	}
	return fail("start the launcher: %v", runErr)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// remedy is the sentence appended to the fail-closed error: what to do about it.
const remedy = `To fix this, run dsh on Linux 5.13 or newer with Landlock enabled (CONFIG_SECURITY_LANDLOCK=y and "landlock" in the kernel's lsm= list), or, if running commands unconfined is acceptable, switch the profile's executor to bash-local.`

// UnavailableError is the fail-closed error of a confining executor on a host without a
// usable backend: nothing runs.
type UnavailableError struct {
	// Mode is the sandbox mode the call asked for.
	Mode string
	// Reason is the probe's explanation (ProbeResult.Reason).
	Reason string
}

// Error is `sandbox mode "<m>" is requested but no sandbox backend is usable on this
// host; refusing to run the command unconfined.` followed by what to do about it (a
// kernel with Landlock, or the unconfined bash-local executor) and, when known, the
// probe's reason.
func (e *UnavailableError) Error() string {
	msg := fmt.Sprintf("sandbox mode %q is requested but no sandbox backend is usable on this host; refusing to run the command unconfined. %s", e.Mode, remedy)
	if e.Reason != "" {
		msg += " (landlock probe: " + e.Reason + ")"
	}
	return msg
}

// checkBackend returns nil when mode can run on this host: danger-full-access always
// can; the confined modes need a usable backend (Probe), else an *UnavailableError.
func checkBackend(mode string) error {
	if mode == shell.ModeDangerFullAccess {
		return nil
	}
	if r := Probe(); !r.Usable {
		return &UnavailableError{Mode: mode, Reason: r.Reason}
	}
	return nil
}
