package bashnice_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	bashnice "example.com/bash-nice"
	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/plugins/toolbash/toolbashtest"
	"github.com/dsh-dev/dsh/shell"
	"github.com/dsh-dev/dsh/shell/bashexec"
	"github.com/dsh-dev/dsh/shell/shelltest"
)

// bash-nice honours the executor seam, and shows the model through the bash tool what
// the tool promises, as checked by dsh's conformance kits.
func TestConformance(t *testing.T) {
	target := shelltest.Target{
		Name: bashnice.Name,
		New: func(t *testing.T, cfg bashexec.Config) (shell.Executor, shell.PolicyResolver) {
			sup := subprocess.New(subprocess.Options{SpillRoot: t.TempDir()})
			t.Cleanup(sup.Close)
			ex, err := bashnice.New(sup, &bashnice.Config{Config: cfg, Niceness: 10})
			if err != nil {
				t.Fatal(err)
			}
			return ex, nil
		},
	}
	shelltest.Run(t, target)
	toolbashtest.Run(t, target)
}

// Commands really run at the configured niceness.
func TestNiceness(t *testing.T) {
	sup := subprocess.New(subprocess.Options{SpillRoot: t.TempDir()})
	defer sup.Close()
	ex, err := bashnice.New(sup, &bashnice.Config{Config: bashexec.DefaultConfig(), Niceness: 7})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := ex.Resolve(shell.ExecRequest{Command: "nice"})
	if err != nil {
		t.Fatal(err)
	}
	x, err := ex.Execute(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	res, err := x.Result(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := ownNiceness(t) + 7
	if got := strings.TrimSpace(res.Stdout.Text); got != strconv.Itoa(want) {
		t.Errorf("niceness %q, want %d", res.Stdout.Text, want)
	}
}

// The plugin's config is checked like the built-in executors': a bad niceness and a
// wrongly typed shared key name the row and the key.
func TestConfigErrors(t *testing.T) {
	cat, err := container.NewCatalog(bashnice.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{})
	defer rt.Close()
	for cfg, want := range map[string]string{
		`{"niceness": 40}`:      `row "bash": bash-nice: niceness must be between 1 and 19, got 40`,
		`{"timeoutMs": "5000"}`: `row "bash": bash-nice: timeoutMs must be a positive finite number, got the string "5000"`,
		`{"timeoutMs": 900000}`: `row "bash": bash-nice: timeoutMs (900000) must be no greater than maxTimeoutMs (600000)`,
	} {
		var m map[string]any
		json.Unmarshal([]byte(cfg), &m)
		if err := rt.Validate([]container.Row{{ID: "bash", Plugin: "bash-nice", Config: m}}); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", cfg, err, want)
		}
	}
}

// The example binary is dsh with bash-nice compiled in: it composes the example profile
// and runs a call at the configured niceness.
func TestBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "dsh-nice")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/dsh-nice").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "call", "--profile", "profile.yaml", "bash", `{"command":"nice","description":"Show the niceness"}`)
	cmd.Env = append(os.Environ(), "DSH_HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dsh-nice call: %v\n%s", err, out)
	}
	if want := ownNiceness(t) + 15; strings.TrimSpace(string(out)) != strconv.Itoa(want) {
		t.Errorf("dsh-nice call printed %q, want niceness %d", out, want)
	}
}

// ownNiceness is the niceness the tests run at (commands add theirs to it).
func ownNiceness(t *testing.T) int {
	out, err := exec.Command("nice").Output()
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
