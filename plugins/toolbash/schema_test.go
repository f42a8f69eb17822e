package toolbash_test

import (
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/shell"
)

// TestValuesMatchTheOutputSchema: every shape of the typed result — exit, signal,
// timeout, abort, truncation with a spill file, each sandbox outcome, a background
// job — validates against the outputSchema, as a client sees it (JSON), and the two
// kinds do not match each other's branch.
func TestValuesMatchTheOutputSchema(t *testing.T) {
	data, err := json.Marshal(toolbash.OutputSchema)
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	zero, three := 0, 3
	values := map[string]any{
		"exit 0":      toolbash.ValueOf(shell.RunResult{ExitCode: &zero, TimeoutMs: 120000, Stdout: shell.StreamResult{Text: "hi\n"}}),
		"exit 3":      toolbash.ValueOf(shell.RunResult{ExitCode: &three, Stderr: shell.StreamResult{Text: "bad"}}),
		"signal":      toolbash.ValueOf(shell.RunResult{Signal: "SIGKILL"}),
		"timeout":     toolbash.ValueOf(shell.RunResult{Signal: "SIGTERM", TimedOut: true, TimeoutMs: 100}),
		"abort":       toolbash.ValueOf(shell.RunResult{Signal: "SIGTERM", Aborted: true}),
		"truncated":   toolbash.ValueOf(shell.RunResult{ExitCode: &zero, Stdout: shell.StreamResult{Text: "tail", Truncated: true, SpillPath: "/x/stdout"}}),
		"denied":      toolbash.ValueOf(shell.RunResult{ExitCode: &three, Sandbox: &shell.SandboxFacts{Mode: "read-only", Denied: true, Enforcement: "full"}}),
		"runner":      toolbash.ValueOf(shell.RunResult{ExitCode: &three, Sandbox: &shell.SandboxFacts{Mode: "workspace-write", RunnerFailed: true, Enforcement: "partial"}}),
		"unconfined":  toolbash.ValueOf(shell.RunResult{ExitCode: &zero, Sandbox: &shell.SandboxFacts{Mode: "danger-full-access"}}),
		"background":  toolbash.BackgroundValue{Kind: toolbash.KindBackground, JobID: "bash-1"},
		"handed over": toolbash.BackgroundValue{Kind: toolbash.KindBackground, JobID: "bash-2", HandOver: "input"},
		"at timeout":  toolbash.BackgroundValue{Kind: toolbash.KindBackground, JobID: "bash-3", HandOver: "timeout"},
	}
	for name, v := range values {
		raw, _ := json.Marshal(v)
		var instance any
		json.Unmarshal(raw, &instance)
		if err := resolved.Validate(instance); err != nil {
			t.Errorf("%s: %s does not match: %v", name, raw, err)
		}
	}
	for _, bad := range []string{
		`{"kind":"background","jobId":"bash-1","exitCode":0}`,
		`{"kind":"foreground","jobId":"bash-1"}`,
		`{"kind":"other"}`,
		`{"kind":"background","jobId":"bash-1","handOver":"later"}`,
	} {
		var instance any
		json.Unmarshal([]byte(bad), &instance)
		if resolved.Validate(instance) == nil {
			t.Errorf("%s matches", bad)
		}
	}
}
