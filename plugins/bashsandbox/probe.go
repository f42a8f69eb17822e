package bashsandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/plugins/bashsandbox/internal/launch"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
	"github.com/dsh-dev/dsh/shell"
)

// Backends.
const (
	// BackendNamespaces: user, mount, PID, IPC, UTS (and network) namespaces built once
	// per session, with Landlock and seccomp per command inside them.
	BackendNamespaces = "namespaces"
	// BackendLandlock: Landlock and seccomp per command, no namespaces (hosts without
	// unprivileged user namespaces, or `namespaces: off`).
	BackendLandlock = "landlock"
)

// ProbeResult says which sandbox backends work on this host.
type ProbeResult struct {
	// Usable: some backend confined a real command here.
	Usable bool
	// Backend is the best backend that works (BackendNamespaces, else BackendLandlock).
	Backend string
	// ABI is the kernel's Landlock ABI version (0 when absent).
	ABI int
	// Reason says why no backend is usable; empty when one is.
	Reason string
	// Namespaces: the namespace backend works; NamespacesReason says why not.
	Namespaces       bool
	NamespacesReason string
	// Landlock: the Landlock-only backend works; LandlockReason says why not. It is
	// probed only when the namespaces do not work (or are turned off).
	Landlock       bool
	LandlockReason string
}

var probe struct {
	mu       sync.Mutex
	result   *ProbeResult // the verdict: the probe's, or a box's (confirmed), the first standing
	landlock *string      // the Landlock-only probe's failure ("" = works), once run
	override *ProbeResult
	known    chan struct{} // closed once there is a verdict (made by awaitVerdict)
	runHold  chan struct{} // set by a test: a probe run waits until it is closed
}

// probeTimeout bounds each probe run (generous: the host may be busy).
const probeTimeout = 30 * time.Second

// probeOK is what the probe command prints when its write was refused.
const probeOK = "dsh-sandbox-probe-ok"

// Probe reports which backends work on this host. The first call starts a box of each
// kind, read-only with the network denied, and runs in it a command that must fail to
// create a file in a fresh temporary directory; later calls return the cached result.
// So a kernel without Landlock or user namespaces, a binary whose main does not
// dispatch the launcher, or a box that runs but does not confine are all "not usable" — and executors fail closed (see UnavailableError).
func Probe() ProbeResult {
	if r, ok := verdict(); ok {
		return r // without waiting for a probe that is still running
	}
	probeOnce.Lock()
	defer probeOnce.Unlock()
	probe.mu.Lock()
	if probe.override != nil {
		defer probe.mu.Unlock()
		return *probe.override
	}
	cached, runHold := probe.result, probe.runHold
	probe.mu.Unlock()
	if cached != nil {
		return *cached
	}
	if runHold != nil {
		<-runHold
	}
	r := runProbe()
	probe.mu.Lock()
	defer probe.mu.Unlock()
	settleLocked(r)
	return *probe.result
}

// verdict is the verdict known now, if any.
func verdict() (ProbeResult, bool) {
	probe.mu.Lock()
	defer probe.mu.Unlock()
	switch {
	case probe.override != nil:
		return *probe.override, true
	case probe.result != nil:
		return *probe.result, true
	}
	return ProbeResult{}, false
}

// settleLocked makes r the verdict unless there is one already — the first verdict
// stands — and wakes those awaiting it (probe.mu held).
func settleLocked(r ProbeResult) {
	if probe.result == nil {
		probe.result = &r
	}
	if probe.known != nil {
		close(probe.known)
		probe.known = nil
	}
}

// confirmed records the verdict of a box that confirmed it confines: the namespace
// backend works.
func confirmed() {
	probe.mu.Lock()
	defer probe.mu.Unlock()
	settleLocked(ProbeResult{Usable: true, Backend: BackendNamespaces, ABI: launch.KernelABI(), Namespaces: true})
}

// boxVerdicts reports whether a box may give the verdict (not while a test imposes one).
func boxVerdicts() bool {
	probe.mu.Lock()
	defer probe.mu.Unlock()
	return probe.override == nil
}

// awaitVerdict returns a channel closed once there is a verdict.
func awaitVerdict() <-chan struct{} {
	probe.mu.Lock()
	defer probe.mu.Unlock()
	if probe.result != nil || probe.override != nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	if probe.known == nil {
		probe.known = make(chan struct{})
	}
	return probe.known
}

// probed reports whether chooseBackend(namespaces) has what it needs already: it
// would not run a probe.
func probed(namespaces string) bool {
	probe.mu.Lock()
	defer probe.mu.Unlock()
	switch {
	case probe.override != nil:
		return true
	case probe.result == nil:
		return false
	}
	return namespaces != NamespacesOff || !probe.result.Usable || probe.landlock != nil
}

// probeOnce lets one Probe run at a time (the others wait for its result).
var probeOnce sync.Mutex

func runProbe() ProbeResult {
	res := ProbeResult{ABI: launch.KernelABI()}
	switch {
	case res.ABI < 1:
		res.Reason = "the kernel offers no Landlock ABI"
		return res
	case !dispatched.Load():
		res.Reason = errNotDispatched.Error()
		return res
	}
	if err := probeBackend(true); err != nil {
		res.NamespacesReason = err.Error()
	} else {
		res.Namespaces = true
		res.Usable, res.Backend = true, BackendNamespaces
		return res
	}
	res.Landlock, res.LandlockReason = landlockOnly()
	if res.Landlock {
		res.Usable, res.Backend = true, BackendLandlock
		return res
	}
	res.Reason = "namespaces: " + res.NamespacesReason + "; landlock: " + res.LandlockReason
	return res
}

// landlockOnly probes the Landlock-only backend (once per process): it is what runs
// where user namespaces are unavailable or turned off.
func landlockOnly() (ok bool, reason string) {
	probe.mu.Lock()
	defer probe.mu.Unlock()
	if probe.override != nil {
		return probe.override.Landlock, probe.override.LandlockReason
	}
	if probe.landlock == nil {
		r := ""
		if launch.KernelABI() < 1 {
			r = "the kernel offers no Landlock ABI"
		} else if !dispatched.Load() {
			r = errNotDispatched.Error()
		} else if err := probeBackend(false); err != nil {
			r = err.Error()
		}
		probe.landlock = &r
	}
	return *probe.landlock == "", *probe.landlock
}

// probeBackend runs the probe command in a box of one kind, through a
// Supervisor of its own (process groups only: the probe must not touch the harness's
// cgroups).
func probeBackend(namespaces bool) error {
	dir, err := os.MkdirTemp("", "dsh-sandbox-probe-")
	if err != nil {
		return fmt.Errorf("create the probe directory: %w", err)
	}
	defer os.RemoveAll(dir)
	for _, d := range []string{"tmp", "stage", "ws"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			return err
		}
	}
	// The probe's box dies when its control socket closes: no watchdog needed.
	sup := subprocess.New(subprocess.Options{DisableCgroups: true, NoCrashCleanup: true, SpillRoot: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer sup.Close()
	ws, err := newPin(filepath.Join(dir, "ws"))
	if err != nil {
		return err
	}
	defer ws.dir.Close()
	conf := boxConfig{namespaces: namespaces, network: NetworkDeny, workspace: ws.path}
	b, err := openBox(sup, conf, "", proc.ResourceLimits{}, boxFiles{tmp: filepath.Join(dir, "tmp"), stage: filepath.Join(dir, "stage"), ws: ws.dir}, nil, nil)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "bash-sandbox: "))
	}
	defer b.kill()
	script := `if : > "$1/written" 2>/dev/null; then echo unconfined; exit 3; fi; echo ` + probeOK
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	capture := proc.Capture{MaxBytes: 4096}
	p, err := sup.Spawn(ctx, subprocess.Spec{
		Argv:    []string{"bash", "-c", script, "bash", ws.path},
		Dir:     ws.path,
		Env:     map[string]string{"LC_ALL": "C"},
		Stdout:  capture,
		Stderr:  capture,
		GraceMs: 1000,
		Start:   &cmdStarter{box: b, policy: launch.Policy{Mode: shell.ModeReadOnly, Network: NetworkDeny}},
	})
	if err != nil {
		return fmt.Errorf("start the probe command: %v", err)
	}
	<-p.Done()
	ex, _ := p.Exit()
	out := strings.TrimSpace(p.Stdout().Output().Text)
	errText := strings.TrimSpace(p.Stderr().Output().Text)
	switch {
	case ex.Code != nil && *ex.Code == 0 && out == probeOK:
		return nil
	case ex.Reason == proc.ReasonAbort:
		return fmt.Errorf("the probe command did not finish within %s", probeTimeout)
	case strings.HasPrefix(errText, LauncherFailurePrefix):
		return fmt.Errorf("the sandbox runner failed: %s", strings.TrimPrefix(errText, LauncherFailurePrefix))
	case out == "unconfined":
		return errors.New("the sandbox ran the command but did not confine it")
	}
	return fmt.Errorf("the sandbox did not confirm confinement: exit %v signal %q; stdout: %q; stderr: %q", codeText(ex.Code), ex.Signal, truncate(out, 200), truncate(errText, 200))
}

func codeText(c *int) string {
	if c == nil {
		return "none"
	}
	return fmt.Sprint(*c)
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
		msg += " (sandbox probe: " + e.Reason + ")"
	}
	return msg
}
