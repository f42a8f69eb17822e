package shelltest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/shell"
	"github.com/dsh-dev/dsh/shell/bashexec"
	"github.com/dsh-dev/dsh/shell/shelltest"
)

func TestMain(m *testing.M) { proctest.Main(m) }

// local is the core's local executor, as bash-local mounts it.
func local(t *testing.T, cfg bashexec.Config) (shell.Executor, shell.PolicyResolver) {
	sup := subprocess.New(subprocess.Options{SpillRoot: t.TempDir()})
	t.Cleanup(sup.Close)
	ex, err := bashexec.New(bashexec.Local(sup), cfg, bashexec.Options{Name: "kit-local"})
	if err != nil {
		t.Fatal(err)
	}
	return ex, nil
}

func TestKitPassesTheLocalCore(t *testing.T) {
	shelltest.Run(t, shelltest.Target{Name: "kit-local", New: local})
}

// breakers are executors that each break one rule; the kit must fail each in the
// subtest that checks that rule (and the run as a whole).
var breakers = map[string]struct {
	subtest string
	wrap    func(shell.Execution) shell.Execution
}{
	// An executor that loses the error of a failed start in background reads.
	"drops-spawn-errors": {"SpawnFailure", func(x shell.Execution) shell.Execution { return dropSpawnErrors{x} }},
	// One that re-reads everything: reads are not consuming.
	"rereads": {"ConsumingReads", func(x shell.Execution) shell.Execution { return &rereads{Execution: x} }},
	// One that reports a kill as an abort.
	"kill-is-abort": {"AbortAndKill", func(x shell.Execution) shell.Execution { return killIsAbort{x} }},
}

type dropSpawnErrors struct{ shell.Execution }

func (d dropSpawnErrors) ReadOutput() shell.ProcessRead {
	r := d.Execution.ReadOutput()
	if strings.Contains(r.Delta, "spawn failed") {
		return shell.ProcessRead{}
	}
	return r
}

type rereads struct {
	shell.Execution
	all string
}

func (r *rereads) ReadOutput() shell.ProcessRead {
	read := r.Execution.ReadOutput()
	r.all += read.Delta
	read.Delta = r.all
	return read
}

type killIsAbort struct{ shell.Execution }

func (k killIsAbort) Result(ctx context.Context) (shell.RunResult, error) {
	res, err := k.Execution.Result(ctx)
	if res.Signal != "" && !res.TimedOut {
		res.Aborted = true
	}
	return res, err
}

type broken struct {
	shell.Executor
	wrap func(shell.Execution) shell.Execution
}

func (b broken) Execute(ctx context.Context, spec shell.ExecSpec) (shell.Execution, error) {
	x, err := b.Executor.Execute(ctx, spec)
	if err != nil {
		return nil, err
	}
	return b.wrap(x), nil
}

const brokenVar = "DSH_SHELLTEST_BROKEN"

// TestBrokenExecutor runs the kit against one broken executor; it is meant to fail, and
// runs only inside TestKitFailsBrokenExecutors.
func TestBrokenExecutor(t *testing.T) {
	which := os.Getenv(brokenVar)
	if which == "" {
		t.Skip("run by TestKitFailsBrokenExecutors")
	}
	b := breakers[which]
	shelltest.Run(t, shelltest.Target{Name: "kit-local", New: func(t *testing.T, cfg bashexec.Config) (shell.Executor, shell.PolicyResolver) {
		ex, _ := local(t, cfg)
		return broken{Executor: ex, wrap: b.wrap}, nil
	}})
}

func TestKitFailsBrokenExecutors(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the kit once per broken executor")
	}
	for name, b := range breakers {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenExecutor$/^"+b.subtest+"$", "-test.v")
			cmd.Env = append(os.Environ(), brokenVar+"="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the kit passed an executor that %s:\n%s", name, out)
			}
			if want := "--- FAIL: TestBrokenExecutor/" + b.subtest; !strings.Contains(string(out), want) {
				t.Errorf("the kit failed, but not in %s:\n%s", b.subtest, out)
			}
		})
	}
}
