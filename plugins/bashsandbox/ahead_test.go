package bashsandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/proctest"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/shell"
)

// A server's first confined call opens its session's box while the probe still runs
// (on the namespace backend), but runs nothing before the probe's verdict; when the
// verdict is Landlock only, the command runs in a Landlock box (in the host's PID
// namespace) and the box opened ahead is retired: its process ends.
func TestBoxOpensAheadOfTheProbeAndRunsNothingBeforeIt(t *testing.T) {
	release, restore := bashsandbox.HoldProbe(bashsandbox.ProbeResult{ABI: bashsandbox.KernelABI(),
		Usable: true, Backend: bashsandbox.BackendLandlock, NamespacesReason: "held by the test", Landlock: true})
	defer restore()
	sup := subprocess.New(subprocess.Options{SpillRoot: t.TempDir()})
	defer sup.Close()
	ws := workspace(t)
	cfg := bashsandbox.DefaultConfig()
	cfg.Cwd, cfg.DefaultMode = ws, shell.ModeWorkspaceWrite
	ex, _, err := bashsandbox.New(sup, cfg, quietLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ran := filepath.Join(ws, "ran")
	type outcome struct {
		res shell.RunResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		ctx := context.Background()
		spec, err := ex.Resolve(shell.ExecRequest{Command: "readlink /proc/self/ns/pid; : > ran", SessionID: "ahead"})
		if err != nil {
			done <- outcome{err: err}
			return
		}
		x, err := ex.Execute(ctx, spec)
		if err != nil {
			done <- outcome{err: err}
			return
		}
		res, err := x.Result(ctx)
		done <- outcome{res, err}
	}()
	var ahead []int
	waitFor(t, "a box opened while the probe runs", func() bool { ahead = bashsandbox.BoxPids(sup); return len(ahead) == 1 })
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the command ran before the probe's verdict")
	}
	release()
	o := <-done
	if o.err != nil || o.res.ExitCode == nil || *o.res.ExitCode != 0 {
		t.Fatalf("the call: %+v, %v", o.res, o.err)
	}
	own, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(o.res.Stdout.Text); got != own {
		t.Errorf("the command's PID namespace %q, want the host's %q (Landlock only)", got, own)
	}
	waitFor(t, "the box opened ahead to end", func() bool { return !slices.Contains(bashsandbox.BoxPids(sup), ahead[0]) && proctest.Gone(ahead[0]) })
}
