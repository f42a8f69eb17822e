package bashexec

import (
	"errors"
	"fmt"
	"math"

	"github.com/dsh-dev/dsh/proc"
)

// LimitsConfig is the `limits:` key of a local executor's configuration (bash-local,
// bash-sandbox): the resource limits of each command and of each session (all its
// commands and jobs together). Every key is optional; an absent one is no limit. An
// executor plugin adds it beside Config:
//
//	type Config struct {
//		bashexec.Config `yaml:",inline"`
//		Limits bashexec.LimitsConfig `yaml:"limits"`
//	}
//
// Memory sizes are a number of bytes or a string with a binary unit ("512MiB",
// "1.5GiB"), so their fields take any YAML value; Resources reads them. A field is nil
// when its key is absent (or null); an explicit 0 is no limit, which lifts an
// executor's default.
type LimitsConfig struct {
	// Memory is the most memory one command may use.
	Memory any `yaml:"memory"`
	// Processes is the most processes (and threads) one command may have at once.
	Processes *float64 `yaml:"processes" valid:"a whole number"`
	// CPUs is one command's CPU quota, in CPUs (e.g. 1.5).
	CPUs *float64 `yaml:"cpus" valid:"a number of CPUs"`
	// SessionMemory, SessionProcesses and SessionCPUs are the same limits for all the
	// commands and jobs of one session together.
	SessionMemory    any      `yaml:"sessionMemory"`
	SessionProcesses *float64 `yaml:"sessionProcesses" valid:"a whole number"`
	SessionCPUs      *float64 `yaml:"sessionCpus" valid:"a number of CPUs"`
}

// Bounds of the limits: a smaller memory limit leaves bash itself no room to start, a
// smaller CPU quota is below the kernel's 1 ms per 100 ms period, and a process count
// past the kernel's largest pid is no limit.
const (
	minMemoryLimit = 1 << 20
	minCPUs        = 0.01
	maxCPUs        = 1 << 16
	maxProcesses   = 1 << 22
)

// Resources reads the limits, or says what is wrong with the first key that is not a
// limit: "limits.memory must be a number of bytes or a size such as \"512MiB\"…" (the
// container prefixes it with the plugin's name).
func (c LimitsConfig) Resources() (proc.ResourceLimits, error) {
	var r proc.ResourceLimits
	var err error
	if r.Memory, err = memoryLimit("memory", c.Memory); err != nil {
		return proc.ResourceLimits{}, err
	}
	if r.SessionMemory, err = memoryLimit("sessionMemory", c.SessionMemory); err != nil {
		return proc.ResourceLimits{}, err
	}
	if r.Processes, err = processLimit("processes", c.Processes); err != nil {
		return proc.ResourceLimits{}, err
	}
	if r.SessionProcesses, err = processLimit("sessionProcesses", c.SessionProcesses); err != nil {
		return proc.ResourceLimits{}, err
	}
	if r.CPUs, err = cpuLimit("cpus", c.CPUs); err != nil {
		return proc.ResourceLimits{}, err
	}
	if r.SessionCPUs, err = cpuLimit("sessionCpus", c.SessionCPUs); err != nil {
		return proc.ResourceLimits{}, err
	}
	return r, nil
}

// Keys lists the keys of l that are set ("memory", "sessionCpus"…), in the order of
// the configuration's documentation.
func Keys(l proc.ResourceLimits) []string {
	var keys []string
	for _, k := range [...]struct {
		key string
		set bool
	}{
		{"memory", l.Memory > 0}, {"processes", l.Processes > 0}, {"cpus", l.CPUs > 0},
		{"sessionMemory", l.SessionMemory > 0}, {"sessionProcesses", l.SessionProcesses > 0}, {"sessionCpus", l.SessionCPUs > 0},
	} {
		if k.set {
			keys = append(keys, k.key)
		}
	}
	return keys
}

// Given reports whether the configuration gives key ("processes"…), even as 0.
func (c LimitsConfig) Given(key string) bool {
	switch key {
	case "memory":
		return c.Memory != nil
	case "processes":
		return c.Processes != nil
	case "cpus":
		return c.CPUs != nil
	case "sessionMemory":
		return c.SessionMemory != nil
	case "sessionProcesses":
		return c.SessionProcesses != nil
	case "sessionCpus":
		return c.SessionCPUs != nil
	}
	return false
}

func memoryLimit(key string, v any) (int64, error) {
	if v == nil || isZeroNumber(v) {
		return 0, nil // absent, or lifted
	}
	n, err := proc.ParseBytes(v)
	if err != nil {
		return 0, fmt.Errorf("limits.%s must be a number of bytes or a size such as \"512MiB\": %w", key, err)
	}
	if n < minMemoryLimit {
		return 0, fmt.Errorf("limits.%s must be at least 1 MiB, got %s", key, proc.FormatBytes(n))
	}
	return n, nil
}

func processLimit(key string, p *float64) (int64, error) {
	if p == nil {
		return 0, nil
	}
	v := *p
	switch {
	case v == 0:
		return 0, nil
	case math.IsNaN(v) || v < 1 || v != math.Trunc(v) || v > maxProcesses:
		return 0, fmt.Errorf("limits.%s must be a whole number from 1 to %d (or 0 for no limit), got %v", key, maxProcesses, v)
	}
	return int64(v), nil
}

func cpuLimit(key string, p *float64) (float64, error) {
	if p == nil {
		return 0, nil
	}
	v := *p
	switch {
	case v == 0:
		return 0, nil
	case math.IsNaN(v) || math.IsInf(v, 0) || v < minCPUs || v > maxCPUs:
		return 0, fmt.Errorf("limits.%s must be a number of CPUs from %v to %d (or 0 for no limit), got %v", key, minCPUs, maxCPUs, v)
	}
	return v, nil
}

// ErrRemoteLimits is why an executor whose commands run on another host refuses a
// `limits:` key: nothing on this host can enforce them there.
var ErrRemoteLimits = errors.New("limits are not enforced on a remote host: the commands run there, outside this host's cgroups; remove the limits key (bound the remote account instead, e.g. with systemd or ulimit there)")

// isZeroNumber reports whether v is a YAML number equal to 0.
func isZeroNumber(v any) bool {
	switch n := v.(type) {
	case int:
		return n == 0
	case int64:
		return n == 0
	case uint64:
		return n == 0
	case float64:
		return n == 0
	}
	return false
}
