package bashlocal_test

import (
	"testing"

	"github.com/dsh-dev/dsh/internal/limitstest"
	bashlocal "github.com/dsh-dev/dsh/plugins/bashlocal"
)

// limitsTarget is bash-local for the limits kit.
var limitsTarget = limitstest.Target{
	Plugin:    bashlocal.Plugin,
	Name:      bashlocal.Name,
	Workspace: func(t testing.TB) string { return t.TempDir() },
}

// The limits of SPEC §12 through the bash tool: memory, processes, the session's
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
