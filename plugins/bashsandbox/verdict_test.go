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

type callOutcome struct {
	res shell.RunResult
	err error
}

// callAsync runs command in session id of ex in the background.
func callAsync(ex shell.Executor, id, command string) <-chan callOutcome {
	done := make(chan callOutcome, 1)
	go func() {
		ctx := context.Background()
		spec, err := ex.Resolve(shell.ExecRequest{Command: command, SessionID: id})
		if err != nil {
			done <- callOutcome{err: err}
			return
		}
		x, err := ex.Execute(ctx, spec)
		if err != nil {
			done <- callOutcome{err: err}
			return
		}
		res, err := x.Result(ctx)
		done <- callOutcome{res, err}
	}()
	return done
}

// checkFiles are the names of a box's check files among names.
func checkFiles(names []string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, ".dsh-check") {
			out = append(out, n)
		}
	}
	return out
}

func verdictRig(t *testing.T, log *proctest.Buffer) (*subprocess.Supervisor, shell.Executor, string) {
	t.Helper()
	noProcessLeft(t)
	sup := subprocess.New(subprocess.Options{SpillRoot: t.TempDir()})
	t.Cleanup(func() { sup.Close() })
	ws := workspace(t)
	cfg := bashsandbox.DefaultConfig()
	cfg.Cwd, cfg.DefaultMode = ws, shell.ModeWorkspaceWrite
	ex, _, err := bashsandbox.New(sup, cfg, log.Logger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return sup, ex, ws
}

// A first confined call before any verdict has its own box give it: the box confirms
// that a thread it confines is refused a write in its /tmp, and the command runs in
// the namespaces while the probe has not run (held by the test).
func TestBoxVerdictFromTheFirstCall(t *testing.T) {
	release, restore := bashsandbox.HoldProbeRuns()
	defer restore()
	defer release()
	_, ex, _ := verdictRig(t, &proctest.Buffer{})
	if _, ok := bashsandbox.KnownVerdict(); ok {
		t.Fatal("a verdict before the first call")
	}
	o := <-callAsync(ex, "first", "readlink /proc/self/ns/pid; ls -A /tmp")
	if o.err != nil || o.res.ExitCode == nil || *o.res.ExitCode != 0 {
		t.Fatalf("the call: %+v, %v", o.res, o.err)
	}
	own, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(o.res.Stdout.Text), "\n")
	if lines[0] == own {
		t.Errorf("the command ran in the host's PID namespace %q, want the box's", own)
	}
	if checks := checkFiles(lines[1:]); len(checks) > 0 {
		t.Errorf("the check left %q in the box's /tmp", checks)
	}
	v, ok := bashsandbox.KnownVerdict()
	if !ok || !v.Usable || v.Backend != bashsandbox.BackendNamespaces || !v.Namespaces {
		t.Errorf("the verdict after the call: %+v, %v; want the namespace backend", v, ok)
	}
}

// A box that does not confine gives no verdict, and runs nothing: its confirmation
// (checked here under a policy that lets the write through) fails, the box is killed,
// the check's file is removed, and the call waits for the probe; once the probe has
// given its verdict, the command runs in a new box.
func TestBoxVerdictNotFromABoxThatDoesNotConfine(t *testing.T) {
	release, restore := bashsandbox.HoldProbeRuns()
	defer restore()
	defer release()
	defer bashsandbox.CheckUnder(func(network string) bashsandbox.LaunchPolicy {
		return bashsandbox.LaunchPolicy{Mode: shell.ModeWorkspaceWrite, WorkspaceRoot: "/tmp", Network: network}
	})()
	log := &proctest.Buffer{}
	sup, ex, ws := verdictRig(t, log)
	ran := filepath.Join(ws, "ran")
	done := callAsync(ex, "unconfirmed", "ls -A /tmp; : > ran")
	var first int
	waitFor(t, "a box opened", func() bool {
		if pids := bashsandbox.BoxPids(sup); len(pids) > 0 {
			first = pids[0]
			return true
		}
		return false
	})
	waitFor(t, "the box that did not confirm to end", func() bool { return proctest.Gone(first) })
	if _, ok := bashsandbox.KnownVerdict(); ok {
		t.Fatal("a box that does not confine gave a verdict")
	}
	if want := "a confined thread of the box created a file in its /tmp"; !strings.Contains(log.String(), want) {
		t.Errorf("the log does not say %q:\n%s", want, log.String())
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the command ran before a verdict")
	}
	select {
	case o := <-done:
		t.Fatalf("the call ended before the probe's verdict: %+v, %v", o.res, o.err)
	default:
	}
	release()
	o := <-done
	if o.err != nil || o.res.ExitCode == nil || *o.res.ExitCode != 0 {
		t.Fatalf("the call: %+v, %v", o.res, o.err)
	}
	if checks := checkFiles(strings.Split(o.res.Stdout.Text, "\n")); len(checks) > 0 {
		t.Errorf("the box's /tmp holds %q: the check's file was not removed", checks)
	}
	if pids := bashsandbox.BoxPids(sup); slices.Contains(pids, first) || len(pids) != 1 {
		t.Errorf("boxes after the verdict: %v (the one that did not confirm: %d)", pids, first)
	}
	if v, ok := bashsandbox.KnownVerdict(); !ok || v.Backend != bashsandbox.BackendNamespaces {
		t.Errorf("the probe's verdict: %+v, %v", v, ok)
	}
}
