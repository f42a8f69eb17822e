package bashlocal_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/kits/limitstest"
	bashlocal "github.com/dsh-dev/dsh/plugins/bashlocal"
)

// limitsTarget is bash-local for the limits kit.
var limitsTarget = limitstest.Target{
	Plugin:    bashlocal.Plugin,
	Name:      bashlocal.Name,
	Workspace: func(t testing.TB) string { return t.TempDir() },
}

// The resource limits (docs/limits.md) through the bash tool: memory, processes, the session's
// shared memory, a job's memory, the CPU quota.
func TestLimits(t *testing.T) { limitstest.Run(t, limitsTarget) }

// A configured limit on a host without its controller fails the row.
func TestLimitsWithoutController(t *testing.T) {
	for _, key := range []string{"memory", "processes", "cpus", "sessionMemory"} {
		t.Run(key, func(t *testing.T) {
			limitstest.WithoutController(t, limitsTarget, key, map[string]any{"memory": "64MiB", "sessionMemory": "64MiB", "processes": 10, "cpus": 1}[key])
		})
	}
}

// The limits keys' messages: each names its key; a limit's value of the wrong kind
// is worded from its `valid` tag.
func TestLimitsConfigMessages(t *testing.T) {
	rt := newRuntime(t)
	for _, tc := range []struct {
		limits map[string]any
		want   string
	}{
		{map[string]any{"memory": "lots"}, `bash-local: limits.memory must be a number of bytes or a size such as "512MiB": expected a number of bytes or a size such as "512MiB" (units KiB, MiB, GiB, TiB), got "lots"`},
		{map[string]any{"memory": "1GB"}, `bash-local: limits.memory must be a number of bytes or a size such as "512MiB": expected a number of bytes or a size such as "512MiB" (units KiB, MiB, GiB, TiB), got "1GB"`},
		{map[string]any{"sessionMemory": 4096}, `bash-local: limits.sessionMemory must be at least 1 MiB, got 4 KiB`},
		{map[string]any{"processes": 1.5}, `bash-local: limits.processes must be a whole number from 1 to 4194304 (or 0 for no limit), got 1.5`},
		{map[string]any{"sessionProcesses": -3}, `bash-local: limits.sessionProcesses must be a whole number from 1 to 4194304 (or 0 for no limit), got -3`},
		{map[string]any{"processes": "ten"}, `bash-local: limits.processes must be a whole number, got the string "ten"`},
		{map[string]any{"cpus": 0.001}, `bash-local: limits.cpus must be a number of CPUs from 0.01 to 65536 (or 0 for no limit), got 0.001`},
		{map[string]any{"sessionCpus": "two"}, `bash-local: limits.sessionCpus must be a number of CPUs, got the string "two"`},
		{map[string]any{"tmpSize": "1GiB"}, `config: unknown key "limits.tmpSize" (known keys: cpus, memory, processes, sessionCpus, sessionMemory, sessionProcesses)`},
	} {
		err := rt.Validate(rows(nil, map[string]any{"limits": tc.limits}))
		var re *container.RowError
		if !errors.As(err, &re) || re.Err.Error() != tc.want {
			t.Errorf("limits %v: %v\nwant %s", tc.limits, err, tc.want)
		}
	}
	// Absent, null or 0: no limit.
	for _, ok := range []map[string]any{{}, {"memory": nil, "processes": 0, "cpus": 0, "sessionMemory": 0}, {"memory": "1.5GiB", "processes": 100, "cpus": 1.5}} {
		if err := rt.Validate(rows(nil, map[string]any{"limits": ok})); err != nil {
			t.Errorf("limits %v: %v", ok, err)
		}
	}
}

// Without limits the bash tool's description is the same as before limits existed; with
// them it names them.
func TestLimitsDescription(t *testing.T) {
	plain := limitstest.Compose(t, limitsTarget, nil).Description()
	if strings.Contains(plain, "limit") {
		t.Errorf("a description without limits mentions them:\n%s", plain)
	}
	limited := limitstest.Compose(t, limitsTarget, map[string]any{"memory": "512MiB", "processes": 200, "cpus": 1.5, "sessionMemory": "2GiB"}).Description()
	want := plain + "\n- Resource limits: each command may use at most 512 MiB of memory, 200 processes, 1.5 CPUs; all commands and background jobs of this session together at most 2 GiB of memory. "
	if !strings.HasPrefix(limited, want) {
		t.Errorf("description with limits:\n%s\nwant it to start with:\n%s", limited, want)
	}
}
