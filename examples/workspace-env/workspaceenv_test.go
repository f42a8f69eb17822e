package workspaceenv_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExampleBinaryMountsThePlugin builds the example dsh binary and mounts the plugin
// through a profile row, end to end.
func TestExampleBinaryMountsThePlugin(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "dsh-workspace")
	build := exec.Command("go", "build", "-o", bin, "./cmd/dsh-workspace")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ws := t.TempDir()
	run := func(args ...string) (string, string, error) {
		cmd := exec.Command(bin, args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}

	out, stderr, err := run("call", "--profile", "example.yaml", "--workspace", ws, "bash",
		`{"command":"echo $DSH_PROJECT $DSH_WORKSPACE","description":"Show the example variables"}`)
	if err != nil || out != "demo "+ws+"\n" {
		t.Fatalf("call: %q %v\n%s", out, err, stderr)
	}

	out, _, err = run("status", "--profile", "example.yaml")
	if err != nil || !strings.Contains(out, "workspace-env") || !strings.Contains(out, "active") {
		t.Errorf("status:\n%s", out)
	}
	// The descriptions the contributor declared are shown to the user: shell-env's row.
	if !strings.Contains(out, "contributed variables: DSH_PROJECT (workspace-env) — the project name configured in the profile; "+
		"DSH_WORKSPACE (workspace-env) — the calling session's workspace directory") {
		t.Errorf("status does not describe the contributed variables:\n%s", out)
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("extends: default\nplugins:\n  - id: workspace-env\n    name: workspace-env\n    config:\n      project: \"\"\n"), 0o644)
	_, stderr, err = run("check", "--profile", bad)
	if err == nil || !strings.Contains(stderr, `row "workspace-env"`) || !strings.Contains(stderr, "workspace-env: project must be a non-empty string") {
		t.Errorf("check: %v\n%s", err, stderr)
	}
}
