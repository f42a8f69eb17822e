// Package kittest tests the conformance kits themselves (shelltest, toolbashtest): the
// core's local executor (Local) for a kit to pass, executors that each break one rule
// (Breaker) for it to fail, and FailsEach, which checks that it fails each in the
// subtest that states the rule. A kit's tests run TestKitPassesTheLocalCore over Local,
// TestBrokenExecutor over Chosen(t, breakers).New, and TestKitFailsBrokenExecutors as
// FailsEach(t, breakers). Tests only; production code must not import it.
package kittest

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
)

// Name is the executor name Local gives its errors.
const Name = "kit-local"

// Local is the core's local executor, as bash-local mounts it, with its own supervisor.
func Local(t *testing.T, cfg bashexec.Config) (shell.Executor, shell.PolicyResolver) {
	sup := subprocess.New(subprocess.Options{SpillRoot: t.TempDir()})
	t.Cleanup(sup.Close)
	ex, err := bashexec.New(sup.Spawner(), cfg, bashexec.Options{Name: Name})
	if err != nil {
		t.Fatal(err)
	}
	return ex, nil
}

// Breaker is Local with one rule broken: Spec changes each spec before it runs, Wrap
// each of its executions (either may be nil).
type Breaker struct {
	// Subtest is the kit's subtest that must fail for it.
	Subtest string
	Spec    func(shell.ExecSpec) shell.ExecSpec
	Wrap    func(shell.Execution) shell.Execution
}

// New is a kit Target's New for the broken executor.
func (b Breaker) New(t *testing.T, cfg bashexec.Config) (shell.Executor, shell.PolicyResolver) {
	ex, _ := Local(t, cfg)
	return broken{Executor: ex, spec: b.Spec, wrap: b.Wrap}, nil
}

type broken struct {
	shell.Executor
	spec func(shell.ExecSpec) shell.ExecSpec
	wrap func(shell.Execution) shell.Execution
}

func (b broken) Execute(ctx context.Context, spec shell.ExecSpec) (shell.Execution, error) {
	if b.spec != nil {
		spec = b.spec(spec)
	}
	x, err := b.Executor.Execute(ctx, spec)
	if err != nil || b.wrap == nil {
		return x, err
	}
	return b.wrap(x), nil
}

// UnderTimeout runs each command under coreutils timeout(1), as a wrapper executor
// might to enforce a limit: on SIGTERM, timeout sends it on to its child and to its
// process group, so the command's processes receive it twice or three times.
func UnderTimeout(spec shell.ExecSpec) shell.ExecSpec {
	spec.Command = "exec timeout 3600 bash -c " + proctest.Quote(spec.Command)
	return spec
}

// chosenVar names, in the child process FailsEach starts, the breaker it runs.
const chosenVar = "DSH_KITTEST_BREAKER"

// Chosen returns the breaker this process runs, and skips t outside the child process
// FailsEach starts (its kit run is meant to fail).
func Chosen(t *testing.T, breakers map[string]Breaker) Breaker {
	name := os.Getenv(chosenVar)
	if name == "" {
		t.Skip("run by TestKitFailsBrokenExecutors")
	}
	b, ok := breakers[name]
	if !ok {
		t.Fatalf("no breaker %q", name)
	}
	return b
}

// FailsEach runs this test binary's TestBrokenExecutor once per breaker, in a child
// process limited to the breaker's subtest, and fails t unless that subtest fails. A
// kit run that passes is tried again, up to attempts runs in all: a check of signal
// counts (TermOnce) sees a wrapper's second SIGTERM in most teardowns, not in all (on
// a loaded machine the two may arrive together and count once).
func FailsEach(t *testing.T, breakers map[string]Breaker) {
	if testing.Short() {
		t.Skip("runs the kit once per broken executor")
	}
	for name, b := range breakers {
		t.Run(name, func(t *testing.T) {
			var out []byte
			var err error
			for range attempts {
				cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenExecutor$/^"+b.Subtest+"$", "-test.v")
				cmd.Env = append(os.Environ(), chosenVar+"="+name)
				if out, err = cmd.CombinedOutput(); err != nil {
					break
				}
			}
			if err == nil {
				t.Fatalf("the kit passed an executor that %s, %d times:\n%s", name, attempts, out)
			}
			if want := "--- FAIL: TestBrokenExecutor/" + b.Subtest; !strings.Contains(string(out), want) {
				t.Errorf("the kit failed, but not in %s:\n%s", b.Subtest, out)
			}
		})
	}
}

// attempts is how many kit runs FailsEach makes of a broken executor before it says
// the kit passed it.
const attempts = 3

// DropsSpawnErrors loses the error of a failed start in background reads.
func DropsSpawnErrors(x shell.Execution) shell.Execution { return dropSpawnErrors{x} }

type dropSpawnErrors struct{ shell.Execution }

func (d dropSpawnErrors) ReadOutput() shell.ProcessRead {
	r := d.Execution.ReadOutput()
	if strings.Contains(r.Delta, "spawn failed") {
		return shell.ProcessRead{}
	}
	return r
}

// Rereads returns everything read so far on every read: reads are not consuming.
func Rereads(x shell.Execution) shell.Execution { return &rereads{Execution: x} }

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

// KillIsAbort reports a kill as an abort.
func KillIsAbort(x shell.Execution) shell.Execution { return killIsAbort{x} }

type killIsAbort struct{ shell.Execution }

func (k killIsAbort) Result(ctx context.Context) (shell.RunResult, error) {
	res, err := k.Execution.Result(ctx)
	if res.Signal != "" && !res.TimedOut {
		res.Aborted = true
	}
	return res, err
}

// SwapsStreams swaps stdout and stderr in results.
func SwapsStreams(x shell.Execution) shell.Execution { return swapsStreams{x} }

type swapsStreams struct{ shell.Execution }

func (s swapsStreams) Result(ctx context.Context) (shell.RunResult, error) {
	res, err := s.Execution.Result(ctx)
	res.Stdout, res.Stderr = res.Stderr, res.Stdout
	return res, err
}
