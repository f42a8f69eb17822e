package subprocess_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
)

func TestMain(m *testing.M) { proctest.Main(m) }

var defaultCapture = proc.Capture{MaxBytes: 64000, SpillMaxBytes: 64 << 20}

func bashSpec(script string) subprocess.Spec {
	return subprocess.Spec{
		Argv:    []string{"bash", "-c", script},
		Stdout:  defaultCapture,
		Stderr:  defaultCapture,
		GraceMs: 1000,
	}
}

// newSup returns a Supervisor closed at the end of the test, spilling into a temp dir.
func newSup(t *testing.T, disableCgroups bool) *subprocess.Supervisor {
	t.Helper()
	s := subprocess.New(subprocess.Options{DisableCgroups: disableCgroups, SpillRoot: t.TempDir()})
	t.Cleanup(s.Close)
	s.WatchdogPid() // waits for the watchdog's start, so what it opens is in place
	return s
}

// forModes runs fn once with cgroup isolation (skipped where cgroup v2 is not writable)
// and once with the process group alone.
func forModes(t *testing.T, fn func(t *testing.T, sup *subprocess.Supervisor)) {
	t.Run("cgroup", func(t *testing.T) {
		proctest.NoLeftovers(t)
		sup := newSup(t, false)
		if !sup.UsesCgroups() {
			t.Skipf("cgroup isolation unavailable here: %s", sup.Isolation())
		}
		fn(t, sup)
	})
	t.Run("process-group", func(t *testing.T) {
		proctest.NoLeftovers(t)
		fn(t, newSup(t, true))
	})
}

func spawn(t *testing.T, sup *subprocess.Supervisor, spec subprocess.Spec) *subprocess.Process {
	t.Helper()
	p, err := sup.Spawn(context.Background(), spec)
	if err != nil {
		t.Fatalf("Spawn(%q): %v", spec.Argv, err)
	}
	return p
}

func waitOutput(t *testing.T, p *subprocess.Process, want string) {
	t.Helper()
	proctest.WaitFor(t, 10*time.Second, "output "+want, func() bool {
		return strings.Contains(p.Stdout().Output().Text, want)
	})
}

// deadPid returns a pid no process can have: one above the kernel's pid_max.
func deadPid(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	max, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	return max + 1
}
