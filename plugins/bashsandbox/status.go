package bashsandbox

import (
	"fmt"
	"os"
	"strings"

	"github.com/dsh-dev/dsh/plugins/bashsandbox/internal/launch"
	"github.com/dsh-dev/dsh/shell"
)

// backend is what confines an executor's commands on this host.
type backend struct {
	usable bool
	reason string // why nothing is usable
	kind   string // BackendNamespaces or BackendLandlock
	why    string // why Landlock only
	abi    int
	userns bool // the host allows user namespaces
}

// chooseBackend chooses the backend: the namespaces where the host has them and the
// configuration (namespaces) does not turn them off, else Landlock only.
func chooseBackend(namespaces string) backend {
	r := Probe()
	be := backend{abi: r.ABI, userns: r.Namespaces}
	switch {
	case !r.Usable:
		be.reason = r.Reason
	case namespaces == NamespacesOff:
		if ok, why := landlockOnly(); !ok {
			be.reason = "namespaces are off and the Landlock-only backend does not work: " + why
		} else {
			be.usable, be.kind, be.why = true, BackendLandlock, "namespaces are off in the configuration"
		}
	case r.Namespaces:
		be.usable, be.kind = true, BackendNamespaces
	default:
		be.usable, be.kind, be.why = true, BackendLandlock, "user namespaces unavailable: "+r.NamespacesReason
	}
	return be
}

func (b backend) missing(network string) []string {
	m := Missing(b.kind, b.abi, network, b.userns)
	if b.namespaces() && !registryUsable() {
		m = append(m, MissingInstanceRegistry)
	}
	return m
}

// namespaces reports whether the backend builds a box in namespaces of its own.
func (b backend) namespaces() bool { return b.kind == BackendNamespaces }

// detail is the status line of the row: the backend and what it enforces under the
// default mode and network policy, or why confined calls fail closed.
func (b backend) detail(defaultMode, network string) string {
	if !b.usable {
		return fmt.Sprintf("sandbox backend unavailable: calls in %s or %s mode fail closed (%s)",
			shell.ModeReadOnly, shell.ModeWorkspaceWrite, b.reason)
	}
	what := fmt.Sprintf("user namespaces + Landlock ABI %d", b.abi)
	if b.kind != BackendNamespaces {
		what = fmt.Sprintf("Landlock ABI %d only (%s)", b.abi, b.why)
	}
	if launch.SeccompSupported {
		what += " + seccomp"
	}
	missing := b.missing(network)
	detail := fmt.Sprintf("sandbox: %s, default mode %s, network %s, enforcement %s",
		what, defaultMode, network, enforcementOf(missing))
	if len(missing) > 0 {
		detail += "; missing: " + missingText(missing)
	}
	return detail
}

// Enforcement values (shell.SandboxFacts.Enforcement).
const (
	// EnforcementFull: the host provides every guarantee of a confined mode.
	EnforcementFull = launch.EnforcementFull
	// EnforcementPartial: some guarantee is missing on this host; Missing names each.
	EnforcementPartial = launch.EnforcementPartial
)

// The guarantees a host can lack, as Missing names them (and, for what can change
// while dsh runs, backend.missing: MissingInstanceRegistry).
const (
	MissingProtectedPaths   = "read-only protected paths inside writable roots (no mount namespace: workspace-write calls fail closed while one exists)"
	MissingSpillPrivacy     = "other sessions' and other dsh processes' spill files and session temp dirs hidden from confined commands (no mount namespace: they stay readable)"
	MissingSecretFiles      = "the serve token hidden from confined commands (no mount namespace: $DSH_HOME/serve-token and the files given to HideFile stay readable)"
	MissingNestedUserns     = "no nested user namespaces (namespaces are off: a command may create a user namespace and hold capabilities in it)"
	MissingBoundingSet      = "an empty capability bounding set (not root and no user namespace)"
	MissingTruncate         = "truncate(2) denied outside the writable set (Landlock ABI < 3)"
	MissingTCP              = "TCP connect and bind denied (Landlock ABI < 4)"
	MissingSignalScope      = "signals and abstract sockets scoped to the command (Landlock ABI < 6)"
	MissingSocketFilter     = "UNIX, UDP, raw and Multipath TCP sockets, TCP Fast Open sends, listen(2) and UNIX datagram socket pairs denied (no seccomp filter for this architecture)"
	MissingKeyringFilter    = "kernel keyrings out of reach (no seccomp filter for this architecture: a command can read and change the harness's session keyring)"
	MissingCgroupFilter     = "commands kept in their cgroup (no seccomp filter for this architecture: clone3 with CLONE_INTO_CGROUP moves a command, and what it starts, out of reach of the timeout, the kill and the limits)"
	MissingCgroupHold       = "commands kept in their cgroup (ptrace is forbidden here, by Yama's ptrace_scope 3 or another security module: the box puts commands in their cgroup with clone3, which a command may then use to move out of reach of the timeout, the kill and the limits)"
	MissingInstanceRegistry = "other dsh processes' session temp dirs and spill files hidden from confined commands (their registry, /tmp/dsh-instances-<uid>, cannot be made or is not a private directory of this user)"
	MissingMetadata         = "file metadata outside the writable set unchanged (no read-only mount: a command may chmod, chown or touch any file its user owns)"
)

// Missing lists the guarantees of a confined mode that a backend cannot give on a host
// with Landlock ABI abi, for a network policy; hostUserns says whether the host lets
// unprivileged processes create user namespaces (relevant when namespaces are off).
// Empty means enforcement "full".
func Missing(backend string, abi int, network string, hostUserns bool) []string {
	var out []string
	if backend != BackendNamespaces {
		out = append(out, MissingProtectedPaths, MissingSpillPrivacy, MissingSecretFiles, MissingMetadata)
		if hostUserns {
			out = append(out, MissingNestedUserns)
		}
		if os.Geteuid() != 0 {
			out = append(out, MissingBoundingSet)
		}
	}
	if abi < 3 {
		out = append(out, MissingTruncate)
	}
	if network == NetworkDeny && abi < 4 {
		out = append(out, MissingTCP)
	}
	if abi < 6 {
		out = append(out, MissingSignalScope)
	}
	if network == NetworkDeny && !launch.SeccompSupported {
		out = append(out, MissingSocketFilter)
	}
	if !launch.SeccompSupported {
		out = append(out, MissingKeyringFilter)
	}
	if backend != BackendNamespaces {
		// The namespace backend masks every cgroup v2 mount instead (launch's plan).
		if !launch.SeccompSupported {
			out = append(out, MissingCgroupFilter)
		} else if !launch.HoldAtExec() {
			out = append(out, MissingCgroupHold)
		}
	}
	return out
}

// enforcementOf is "full" when nothing is missing, else "partial".
func enforcementOf(missing []string) string {
	if len(missing) == 0 {
		return EnforcementFull
	}
	return EnforcementPartial
}

// missingText joins missing guarantees for a status line.
func missingText(missing []string) string { return strings.Join(missing, "; ") }
