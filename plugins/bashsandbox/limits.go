package bashsandbox

import (
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
	"github.com/dsh-dev/dsh/shell/bashexec"
)

// Limits is bash-sandbox's `limits:` key: bash-local's resource limits, with defaults
// of its own, and tmpSize (see docs/limits.md).
type Limits struct {
	bashexec.LimitsConfig `yaml:",inline"`
	// TmpSize is the size of each of a session's private /tmp and /dev/shm (tmpfs
	// mounts of its box): a number of bytes or a size such as "512MiB"; default 1GiB.
	TmpSize any `yaml:"tmpSize"`
}

// The defaults: a fork bomb in one command, or in one session, stays far below the
// host's pid space, leaving other sessions (and the harness) room to run.
const (
	defaultProcesses        = 1024
	defaultSessionProcesses = 4096
	defaultTmpSize          = 1 << 30
)

// check checks the keys given (the container prefixes the message with the plugin's
// name), and that this host has the controllers they need.
func (l Limits) check() error {
	r, err := l.LimitsConfig.Resources()
	if err != nil {
		return err
	}
	if _, err := l.tmpSize(); err != nil {
		return err
	}
	return subprocess.CheckHostLimits(r)
}

// tmpSize is the size of the private /tmp and /dev/shm.
func (l Limits) tmpSize() (int64, error) {
	if l.TmpSize == nil {
		return defaultTmpSize, nil
	}
	n, err := proc.ParseBytes(l.TmpSize)
	if err != nil {
		return 0, fmt.Errorf("limits.tmpSize must be a number of bytes or a size such as \"512MiB\": %w", err)
	}
	if n < 1<<20 {
		return 0, fmt.Errorf("limits.tmpSize must be at least 1 MiB, got %s", proc.FormatBytes(n))
	}
	return n, nil
}

// resources are the limits commands run under: the keys given, each of which sup must
// be able to enforce ("limits.<key> cannot be enforced on this host: …"), and the
// defaults of the keys not given, each where sup can enforce it. unenforced says which
// defaults it cannot, and why ("" when it can all).
func (l Limits) resources(sup *subprocess.Supervisor) (r proc.ResourceLimits, unenforced string, err error) {
	r, err = l.LimitsConfig.Resources()
	if err != nil {
		return r, "", fmt.Errorf("%s: %w", pluginName, err)
	}
	if err := sup.CheckLimits(r); err != nil {
		return r, "", fmt.Errorf("%s: %w", pluginName, err)
	}
	var skipped []string
	var why string
	for _, d := range []struct {
		key   string
		limit proc.ResourceLimits
		set   func(*proc.ResourceLimits)
	}{
		{"processes", proc.ResourceLimits{Processes: defaultProcesses}, func(r *proc.ResourceLimits) { r.Processes = defaultProcesses }},
		{"sessionProcesses", proc.ResourceLimits{SessionProcesses: defaultSessionProcesses}, func(r *proc.ResourceLimits) { r.SessionProcesses = defaultSessionProcesses }},
	} {
		if l.Given(d.key) {
			continue
		}
		if err := sup.CheckLimits(d.limit); err != nil {
			skipped = append(skipped, d.key)
			if le, ok := err.(*subprocess.LimitError); ok {
				why = le.Why
			}
			continue
		}
		d.set(&r)
	}
	if len(skipped) > 0 {
		unenforced = "the default " + strings.Join(skipped, " and ") + " limits are not enforced (" + why + ")"
	}
	return r, unenforced, nil
}

// TmpSizeUnenforced is what the status says of tmpSize on a backend without a mount
// namespace.
const TmpSizeUnenforced = "limits: tmpSize not enforced (no mount namespace: the private temp dir is a directory of the host's)"

// limitsDetail is what the row's status says of the limits: their mechanism, the
// defaults the host cannot enforce, and tmpSize where no box mounts a private /tmp
// (namespaces false).
func limitsDetail(sup *subprocess.Supervisor, r proc.ResourceLimits, unenforced string, namespaces bool) string {
	var parts []string
	if m := sup.LimitsMechanism(r); m != "" {
		parts = append(parts, "limits: "+m)
	}
	if unenforced != "" {
		parts = append(parts, "limits: "+unenforced)
	}
	if !namespaces {
		parts = append(parts, TmpSizeUnenforced)
	}
	return strings.Join(parts, "; ")
}
