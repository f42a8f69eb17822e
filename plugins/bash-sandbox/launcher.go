package bashsandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/dsh-dev/dsh/plugins/bash-sandbox/internal/launch"
	"github.com/dsh-dev/dsh/plugins/shell"
)

// LauncherArg is the hidden first argument that turns the dsh binary into the sandbox
// launcher.
const LauncherArg = launch.Arg

// RunnerFailureExitCode is the exit status of a launcher that failed before the command
// ran.
const RunnerFailureExitCode = launch.RunnerFailureExitCode

// RunnerFailurePrefix starts the one stderr line a failed launcher writes.
const RunnerFailurePrefix = launch.RunnerFailurePrefix

// Network policies.
const (
	// NetworkDeny forbids TCP connect and bind (and UDP, on kernels that can restrict it)
	// in the confined modes. The default.
	NetworkDeny = launch.NetworkDeny
	// NetworkAllow leaves the network unrestricted.
	NetworkAllow = launch.NetworkAllow
)

// LaunchPolicy is what one launcher run confines its command to:
//
//	Mode          string   // shell.ModeReadOnly or shell.ModeWorkspaceWrite
//	WorkspaceRoot string   // the canonical directory workspace-write may modify
//	WritableRoots []string // further directories workspace-write may modify (temp dirs)
//	Network       string   // NetworkDeny or NetworkAllow
//
// Its Validate method checks that the launcher accepts it. (It is defined in the
// launcher's own small package; see the package documentation.)
type LaunchPolicy = launch.Policy

// NewLaunchPolicy turns a resolved sandbox policy and the configured network setting into
// the launcher's policy: workspace-write gets the workspace root plus TempDirs().
// danger-full-access is an error (it runs without the launcher).
func NewLaunchPolicy(p shell.SandboxPolicy, network string) (LaunchPolicy, error) {
	lp := LaunchPolicy{Mode: p.Mode, Network: network}
	if p.Mode == shell.ModeWorkspaceWrite {
		lp.WorkspaceRoot = p.WorkspaceRoot
		for _, dir := range TempDirs() {
			if dir != lp.WorkspaceRoot {
				lp.WritableRoots = append(lp.WritableRoots, dir)
			}
		}
	}
	if err := lp.Validate(); err != nil {
		return LaunchPolicy{}, fmt.Errorf("bash-sandbox: %w", err)
	}
	return lp, nil
}

// TempDirs are the platform temporary areas workspace-write may also modify: /tmp,
// /var/tmp, /dev/shm (POSIX shared memory and semaphores live there) and $TMPDIR, each
// canonical and only if it exists as a directory, without duplicates.
func TempDirs() []string {
	var out []string
	seen := map[string]bool{}
	for _, dir := range []string{"/tmp", "/var/tmp", "/dev/shm", os.Getenv("TMPDIR")} {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		canon, err := filepath.EvalSymlinks(dir)
		if err != nil {
			continue
		}
		if fi, err := os.Stat(canon); err != nil || !fi.IsDir() || seen[canon] {
			continue
		}
		seen[canon] = true
		out = append(out, canon)
	}
	return out
}

// dispatched records that this process called MaybeRunLauncher, i.e. that its binary
// dispatches the launcher. Without it, re-executing the binary could run its ordinary
// main (a test binary would even run its tests again, and probe again, recursively), so
// nothing is launched.
var dispatched atomic.Bool

// errNotDispatched is the failure of a binary whose main does not dispatch the launcher.
var errNotDispatched = errors.New("bash-sandbox: this binary does not dispatch the sandbox launcher: its main (or TestMain) must call bashsandbox.MaybeRunLauncher first")

var self = sync.OnceValues(func() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("bash-sandbox: locate the dsh binary for the sandbox launcher: %w", err)
	}
	return exe, nil
})

// LauncherArgv returns the argv that runs argv (e.g. ["bash", "-c", command]) confined
// by p: the running binary re-executed as the launcher. Executors pass it to the
// process spawner in place of argv; the environment, workdir and stdio are the
// command's own. It fails when this binary does not dispatch the launcher (see
// MaybeRunLauncher).
func LauncherArgv(p LaunchPolicy, argv []string) ([]string, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("bash-sandbox: launcher argv: expected a non-empty program name at argv[0]")
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("bash-sandbox: %w", err)
	}
	if !dispatched.Load() {
		return nil, errNotDispatched
	}
	exe, err := self()
	if err != nil {
		return nil, err
	}
	enc, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("bash-sandbox: encode launch policy: %w", err)
	}
	out := make([]string, 0, len(argv)+3)
	out = append(out, exe, LauncherArg, string(enc))
	return append(out, argv...), nil
}

// MaybeRunLauncher runs the sandbox launcher when this process was started as one
// (os.Args[1] == LauncherArg) and never returns in that case: it either becomes the
// confined command or exits 125 with one "dsh-sandbox: …" line on stderr. Otherwise it
// returns immediately and does nothing but record that this binary dispatches the
// launcher, which LauncherArgv requires. Call it first thing in main (and in TestMain,
// or an init function, of test packages whose tests launch confined commands).
//
// In practice the launcher has already run by then: the launcher's package dispatches
// it from its init function, before most of the binary's packages are initialised
// (see the package documentation), which is what keeps a confined command's start-up
// cheap. This call is the contract, and the fallback.
func MaybeRunLauncher() {
	dispatched.Store(true)
	launch.Main()
}
