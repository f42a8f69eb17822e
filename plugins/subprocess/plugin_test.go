package subprocess_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
)

func newRuntime(t *testing.T) *container.Runtime {
	t.Helper()
	cat, err := container.NewCatalog(subprocess.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(rt.Close)
	return rt
}

func TestPluginReportsIsolationAndOwnsTheSupervisor(t *testing.T) {
	proctest.NoLeftovers(t)
	if subprocess.Plugin.Name != "subprocess" || len(subprocess.Plugin.Aliases) != 1 || subprocess.Plugin.Aliases[0] != "@deepseek-ai/dsh-subprocess" ||
		len(subprocess.Plugin.Provide) != 1 || subprocess.Plugin.Provide[0] != subprocess.Service || subprocess.Service.Name() != "subprocess" {
		t.Errorf("declaration: %+v", subprocess.Plugin)
	}
	for _, c := range []struct {
		config map[string]any
		prefix string
	}{
		{nil, "process isolation: "},
		{map[string]any{"isolation": "process-group"}, "process isolation: process group only (cgroups disabled by configuration)"},
	} {
		rt := newRuntime(t)
		if err := rt.Compose("test", []container.Row{{ID: "subprocess", Plugin: "@deepseek-ai/dsh-subprocess", Config: c.config}}); err != nil {
			t.Fatal(err)
		}
		row := rt.Status().Rows[0]
		if row.State != container.StateActive || !strings.HasPrefix(row.Detail, c.prefix) {
			t.Errorf("row %+v; want active with detail %q…", row, c.prefix)
		}
		t.Logf("detail: %s", row.Detail)
		sup, ok := container.Lookup(rt, subprocess.Service)
		if !ok {
			t.Fatalf("no subprocess service: %+v", rt.Status())
		}
		if c.config == nil && sup.UsesCgroups() && !strings.HasPrefix(row.Detail, "process isolation: cgroup v2 at /") {
			t.Errorf("detail %q with cgroups in use", row.Detail)
		}
		p, err := sup.Spawn(context.Background(), bashSpec(`trap 'echo term' TERM; echo ready; while :; do sleep 0.05; done`))
		if err != nil {
			t.Fatal(err)
		}
		waitOutput(t, p, "ready")
		// Unmounting the row is the activation end: it closes the supervisor.
		if err := rt.Unmount("subprocess"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("unmount returned before the process settled")
		}
		if ex, _ := p.Exit(); ex.Signal != "SIGKILL" || ex.Reason != proc.ReasonDispose {
			t.Errorf("exit after unmount: %+v", ex)
		}
	}
}

func TestPluginRejectsUnknownIsolation(t *testing.T) {
	rt := newRuntime(t)
	err := rt.Compose("test", []container.Row{{ID: "subprocess", Plugin: "subprocess", Config: map[string]any{"isolation": "vm"}}})
	if err == nil || !strings.Contains(err.Error(), `subprocess: isolation must be "auto" or "process-group", got "vm"`) {
		t.Errorf("Compose error %v", err)
	}
}

// The end of a harness session deletes its processes' spill files, and only theirs.
func TestPluginSessionEndDeletesTheSessionsSpills(t *testing.T) {
	proctest.NoLeftovers(t)
	rt := newRuntime(t)
	if err := rt.Compose("test", []container.Row{{ID: "subprocess", Plugin: "subprocess", Config: map[string]any{"spillRoot": t.TempDir()}}}); err != nil {
		t.Fatal(err)
	}
	v, _ := container.Lookup(rt, subprocess.Service)
	sup := v
	spill := func(owner string) *subprocess.Process {
		spec := zeros([]int{5000})
		spec.Owner = owner
		p := spawn(t, sup, spec)
		proctest.AwaitExit(t, p, 10*time.Second)
		if p.Stdout().SpillPath() == "" {
			t.Fatalf("owner %q: no spill", owner)
		}
		return p
	}
	mine, theirs := spill("session-1"), spill("session-2")
	minePath := mine.Stdout().SpillPath()
	if filepath.Base(filepath.Dir(minePath)) != "s-session-1" {
		t.Errorf("spill path %s", minePath)
	}
	rt.EndSession("session-1")
	if _, err := os.Stat(minePath); mine.Stdout().SpillPath() != "" || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the ended session's spill: %q (%v)", mine.Stdout().SpillPath(), err)
	}
	if _, err := os.Stat(theirs.Stdout().SpillPath()); err != nil {
		t.Errorf("another session's spill: %v", err)
	}
}
