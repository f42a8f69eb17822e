package toolbash_test

import (
	"slices"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/plugins/tools"
)

// A foreground result tells observers how its command ended beyond the JSON: the
// executor, output sizes (the whole streams, not the kept tails), spill files and when
// it ran.
func TestRealCommandRun(t *testing.T) {
	h := newReal(t, realSetup{bashConfig: map[string]any{"maxOutputBytes": 1000}})
	before := time.Now()
	res := h.call(t, nil, "bash", bashArgs("seq 1 5000; printf abc >&2; exit 4"))
	run, ok := tools.CommandRunOf(&res)
	if !ok {
		t.Fatalf("no command run in %#v", res.Value)
	}
	// seq 1 5000 writes 23893 bytes.
	if run.Executor != "bash-local" || run.ExitCode == nil || *run.ExitCode != 4 || run.Signal != "" || run.TimedOut ||
		run.StdoutBytes != 23893 || run.StderrBytes != 3 || len(run.Spill) != 1 || run.SandboxMode != "" {
		t.Fatalf("%+v", run)
	}
	if run.Start.Before(before) || !run.End.After(run.Start) {
		t.Fatalf("times %v .. %v (call at %v)", run.Start, run.End, before)
	}
	timeout := h.call(t, nil, "bash", bashArgs("sleep 60", `"timeoutMs":100`))
	if run, _ := tools.CommandRunOf(&timeout); run.ExitCode != nil || run.Signal != "SIGTERM" || !run.TimedOut || !slices.Equal(run.Spill, nil) {
		t.Fatalf("timeout: %+v", run)
	}
	started := h.call(t, nil, "bash", bashArgs("true", `"run_in_background":true`))
	if _, ok := tools.CommandRunOf(&started); ok {
		t.Fatal("a background start reported a finished command run")
	}
}
