package bashsandbox

import (
	"log/slog"
	"sync"

	"github.com/dsh-dev/dsh/plugins/bashsandbox/internal/launch"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/shell"
)

// Internals the black-box tests check directly.
var (
	Facts                = sandboxFacts
	KernelABI            = launch.KernelABI
	NewResolver          = newResolver
	PolicyPrompt         = policyPrompt
	PromptSection        = promptSection
	DefaultSandboxConfig = defaultSandboxConfig
	Widenings            = widenings
	HoldAtExec           = launch.HoldAtExec
	OtherInstanceDirs    = otherInstanceDirs
	RemoveStaleBases     = removeStaleBases
)

// InstancesDir is the registry of this user's dsh processes.
func InstancesDir() string { return instancesDir() }

// SetInstancesDir makes dir the registry until the returned function restores it;
// this process records its directories anew in each (the next executor made records
// them).
func SetInstancesDir(dir string) (restore func()) {
	prev := instancesDir
	forgetRecord()
	instancesDir = func() string { return dir }
	return func() {
		forgetRecord()
		instancesDir = prev
	}
}

// forgetRecord drops this process's record (its lock too).
func forgetRecord() {
	instance.mu.Lock()
	defer instance.mu.Unlock()
	if instance.file != nil {
		instance.file.Close()
	}
	instance.file, instance.name, instance.dirs, instance.warned = nil, "", nil, false
}

// Remedy is the sentence the fail-closed error carries (the contract: the refusal, plus what to do).
const Remedy = remedy

// FailArg is the hidden argument of the launcher's failure mode.
const FailArg = launch.FailArg

// SeccompSupported reports whether this build carries the network filter.
const SeccompSupported = launch.SeccompSupported

// ForceProbe makes Probe (and the Landlock-only probe) report r until the returned
// restore function is called: a host without a backend, or without user namespaces, on
// any host.
func ForceProbe(r ProbeResult) (restore func()) {
	probe.mu.Lock()
	defer probe.mu.Unlock()
	prev := probe.override
	probe.override = &r
	return func() {
		probe.mu.Lock()
		defer probe.mu.Unlock()
		probe.override = prev
	}
}

// ForceUnavailable makes Probe report no usable backend, with reason.
func ForceUnavailable(reason string) (restore func()) {
	return ForceProbe(ProbeResult{ABI: launch.KernelABI(), Reason: reason})
}

// ForceNoNamespaces makes Probe report a host without user namespaces, where the
// Landlock-only backend works (as probed for real).
func ForceNoNamespaces(reason string) (restore func()) {
	ok, why := landlockOnly()
	r := ProbeResult{ABI: launch.KernelABI(), NamespacesReason: reason, Landlock: ok, LandlockReason: why}
	if ok {
		r.Usable, r.Backend = true, BackendLandlock
	}
	return ForceProbe(r)
}

// HoldProbeRuns forgets the cached verdict and makes a probe run wait until release is
// called (it then probes for real): until then only a box can give the verdict.
func HoldProbeRuns() (release, restore func()) {
	forgotten := ForgetProbe()
	hold := make(chan struct{})
	probe.mu.Lock()
	probe.runHold = hold
	probe.mu.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			probe.mu.Lock()
			probe.runHold = nil
			probe.mu.Unlock()
			close(hold)
		})
	}
	return release, func() {
		release()
		probeOnce.Lock() // a probe run released above is over
		probeOnce.Unlock()
		forgotten()
	}
}

// CheckUnder makes the boxes asked to confirm their confinement check it under the
// policy p gives instead: one that lets the write through stands for a box that does
// not confine.
func CheckUnder(p func(network string) launch.Policy) (restore func()) {
	prev := checkPolicy
	checkPolicy = p
	return func() { checkPolicy = prev }
}

// KnownVerdict is the backend's verdict known now, if any.
func KnownVerdict() (ProbeResult, bool) { return verdict() }

// LaunchPolicy is the box's policy type.
type LaunchPolicy = launch.Policy

// SetDispatched pretends this binary does (or does not) dispatch the sandbox and
// forgets the cached probes; the returned function restores both.
func SetDispatched(v bool) (restore func()) {
	prev := dispatched.Swap(v)
	forgotten := ForgetProbe()
	return func() {
		dispatched.Store(prev)
		forgotten()
	}
}

// ForgetProbe drops the cached probe results, so the next Probe probes again; the
// returned function puts them back.
func ForgetProbe() (restore func()) {
	probe.mu.Lock()
	cached, ll := probe.result, probe.landlock
	probe.result, probe.landlock = nil, nil
	probe.mu.Unlock()
	return func() {
		probe.mu.Lock()
		probe.result, probe.landlock = cached, ll
		probe.mu.Unlock()
	}
}

// Sessions is how many sessions the registry holds for owner (any value: a Supervisor).
func Sessions(owner any) int {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	n := 0
	for k := range registry.m {
		if k.owner == owner {
			n++
		}
	}
	return n
}

// EndSession ends session id of owner (the container's session-end hook does it).
func EndSession(owner any, id string) { endSession(owner, id) }

// BoxPids are the pids of owner's live boxes.
func BoxPids(owner any) []int {
	registry.mu.Lock()
	var sessions []*sessionState
	for k, s := range registry.m {
		if k.owner == owner {
			sessions = append(sessions, s)
		}
	}
	registry.mu.Unlock()
	var pids []int
	for _, s := range sessions {
		s.mu.Lock()
		for _, b := range s.boxes {
			pids = append(pids, b.proc.Pid())
		}
		s.mu.Unlock()
	}
	return pids
}

// DefaultLimitsDetail is what a row with the default limits adds to its status detail
// on this host ("; limits: cgroup v1 (pids)"…), on a backend with namespaces or not.
func DefaultLimitsDetail(namespaces bool) string {
	sup := subprocess.New(subprocess.Options{NoCrashCleanup: true})
	defer sup.Close()
	r, unenforced, err := Limits{}.resources(sup)
	if err != nil {
		return "; " + err.Error()
	}
	if d := limitsDetail(sup, r, unenforced, namespaces); d != "" {
		return "; " + d
	}
	return ""
}

// ReadyAhead readies a box ahead on sup, for network (what a server's row does at its
// apply); OpenBoxAhead starts it.
func ReadyAhead(sup *subprocess.Supervisor, network string) { readyAhead(sup, network) }

// DropAhead ends sup's box ahead if no session took it (what the row's end does).
func DropAhead(sup *subprocess.Supervisor) { dropAhead(sup) }

// AheadPid is the pid of sup's box started ahead and not taken yet, once started; 0
// for none.
func AheadPid(sup *subprocess.Supervisor) int {
	ahead.mu.Lock()
	a := ahead.boxes[sup]
	ahead.mu.Unlock()
	if a == nil || !a.spawning {
		return 0
	}
	<-a.ready
	if a.err != nil {
		return 0
	}
	return a.proc.Pid()
}

// NewEnding is New, with the function that does what the end of the executor's
// activation does (a reload that swaps it out).
func NewEnding(sup *subprocess.Supervisor, cfg *Config, log *slog.Logger) (shell.Executor, func(), error) {
	ex, _, sb, err := newExecutor(sup, cfg, log, nil)
	if err != nil {
		return nil, nil, err
	}
	return ex, sb.end, nil
}
