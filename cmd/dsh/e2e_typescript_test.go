package main_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// npmDir is where .ci/run installs the npm packages the end-to-end tests use
// ($DSH_E2E_NPM, default ~/.cache/dsh-e2e-npm).
func npmDir() string {
	if d := os.Getenv("DSH_E2E_NPM"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "dsh-e2e-npm")
}

// nodeScript prepares testdata/<script> to run with the installed npm packages, or skips
// the test (saying why) when they or node are missing.
func nodeScript(t *testing.T, script, pkg string) (node, path string) {
	t.Helper()
	modules := filepath.Join(npmDir(), "node_modules")
	if _, err := os.Stat(filepath.Join(modules, filepath.FromSlash(pkg))); err != nil {
		t.Skipf("%s is not installed in %s (.ci/run installs it; npm may have been unreachable): %v", pkg, modules, err)
	}
	// The Node that .ci/run installs with the packages, else the system's.
	node = filepath.Join(modules, ".bin", "node")
	if _, err := os.Stat(node); err != nil {
		if node, err = exec.LookPath("node"); err != nil {
			t.Skipf("node is not installed: %v", err)
		}
	}
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join("testdata", script))
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, script)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// Bare imports resolve from the script's directory.
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	return node, path
}

// TestTypeScriptClientStatelessLane drives the stateless lane with the TypeScript client
// @modelcontextprotocol/client 2.x pinned to 2026-07-28: discover, tools, bash, a job
// read from a second connection, the fence, the notice, and approval by input_required.
func TestTypeScriptClientStatelessLane(t *testing.T) {
	node, script := nodeScript(t, "ts-client.mjs", "@modelcontextprotocol/client")
	ws, sandboxWS := t.TempDir(), t.TempDir()
	const otherToken = "ts-other-token-0123456789"
	tokens := writeTokens(t, testToken, otherToken)
	srv := startHTTPServe(t, "--workspace", ws, "--token-file", tokens)
	sandbox := startHTTPServe(t, "--workspace", sandboxWS, "--token-file", tokens, "--profile", "sandbox", "--sandbox-mode", "read-only")

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "DSH_URL="+srv.url, "DSH_TOKEN="+testToken, "DSH_OTHER_TOKEN="+otherToken, "DSH_SANDBOX_URL="+sandbox.url)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	type result struct {
		Text       string         `json:"text"`
		IsError    bool           `json:"isError"`
		Structured map[string]any `json:"structured"`
	}
	var got struct {
		Error        string   `json:"error"`
		Era          string   `json:"era"`
		Discover     []string `json:"discover"`
		Server       struct{ Name, Version string }
		Instructions string
		Tools        []struct {
			Name            string `json:"name"`
			HasOutputSchema bool   `json:"hasOutputSchema"`
		}
		Echo            result
		SessionA        string `json:"sessionA"`
		SessionB        string `json:"sessionB"`
		Start           string
		Notice          string
		NoticesResource struct {
			Notices []struct{ Text string }
		} `json:"noticesResource"`
		JobOutput string `json:"jobOutput"`
		Fenced    result
		Declined  result
		Accepted  result
		Asked     []string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output %s: %v", out, err)
	}
	if got.Error != "" {
		t.Fatalf("the TypeScript client failed: %s\nobserved so far: %s\nstderr: %s", got.Error, out, stderr.String())
	}
	// "modern" is the TypeScript SDK's name for the stateless revision's era.
	if got.Era != "modern" || len(got.Discover) == 0 || got.Discover[0] != statelessRevision || got.Server.Name != "dsh" {
		t.Errorf("era %q, supportedVersions %v, server %+v", got.Era, got.Discover, got.Server)
	}
	if !strings.Contains(got.Instructions, "[exit code: N]") {
		t.Errorf("instructions: %q", got.Instructions)
	}
	if len(got.Tools) != 5 || got.Tools[0].Name != "bash" || !got.Tools[0].HasOutputSchema {
		t.Errorf("tools: %+v", got.Tools)
	}
	if got.Echo.Text != "hello from ts\n" || got.Echo.IsError || got.Echo.Structured["kind"] != "foreground" {
		t.Errorf("bash: %+v", got.Echo)
	}
	if got.SessionA != got.SessionB || len(strings.TrimSpace(got.SessionA)) != 16 {
		t.Errorf("DSH_SESSION_ID across connections: %q, %q", got.SessionA, got.SessionB)
	}
	notice := "background job bash-1 (bash: echo from the job; sleep 0.3) finished [status: completed, exit code: 0]. Read its output with job_output."
	if got.Start != "started background job bash-1" || got.Notice != notice {
		t.Errorf("job start %q, notice %q", got.Start, got.Notice)
	}
	if n := got.NoticesResource.Notices; len(n) != 1 || n[0].Text != notice {
		t.Errorf("dsh://notices: %+v", n)
	}
	if got.JobOutput != "from the job\n[status: completed, exit code: 0]" {
		t.Errorf("job_output from the second connection: %q", got.JobOutput)
	}
	if got.Fenced.Text != "Error: job bash-1 belongs to another session" || !got.Fenced.IsError {
		t.Errorf("other principal: %+v", got.Fenced)
	}
	if got.Declined.Text != `Error: the user rejected escalating this command to "workspace-write"` || !got.Declined.IsError {
		t.Errorf("declined: %+v", got.Declined)
	}
	if got.Accepted.Text != "(no output)" || got.Accepted.IsError {
		t.Errorf("accepted: %+v", got.Accepted)
	}
	if _, err := os.Stat(filepath.Join(sandboxWS, "marker")); err != nil {
		t.Errorf("the accepted command did not run: %v", err)
	}
	if len(got.Asked) != 2 || !strings.Contains(got.Asked[0], "touch marker") {
		t.Errorf("questions: %q", got.Asked)
	}
}
