package bashsandbox_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/container/profile"
)

const swapProfile = `plugins:
  - id: tools
    name: tools
  - id: prompt
    name: prompt
  - id: subprocess
    name: subprocess
  - id: shell-env
    name: shell-env
    config: {dshHome: %q}
  - id: jobs
    name: jobs
  - id: bash
    name: %s
    config: {cwd: %q, graceMs: 500}
  - id: tool-bash
    name: tool-bash
  - id: approval
    name: approval
`

// writeAtomically saves like an editor: a new file renamed over the old one.
func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// Item 10: the profile file is edited from bash-local to bash-sandbox while a
// background job runs: the next call is confined, the job keeps running and finishes
// with its full output.
func TestSwapLocalToSandboxWhileAJobRuns(t *testing.T) {
	dir := canonTempDir(t)
	home, root := t.TempDir(), canonTempDir(t)
	path := filepath.Join(dir, "harness.yaml")
	writeAtomically(t, path, fmt.Sprintf(swapProfile, home, "bash-local", root))

	rt := container.NewRuntime(catalog(t), container.Options{Logger: quietLogger()})
	t.Cleanup(func() {
		rt.Close()
		waitFor(t, "no child process left behind", func() bool { return len(children()) == 0 })
	})
	loader := profile.NewLoader(nil)
	p, err := loader.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Compose(p.Name, p.Rows); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var results []error
	rl, err := profile.NewReloader(rt, loader, p, profile.ReloadOptions{
		Debounce: 20 * time.Millisecond,
		Logger:   quietLogger(),
		OnReload: func(err error) { mu.Lock(); results = append(results, err); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	attempts := func() (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(results) == 0 {
			return 0, nil
		}
		return len(results), results[len(results)-1]
	}
	waitFor(t, "the reloader's first check", func() bool { n, _ := attempts(); return n >= 1 })
	st := &stack{rt: rt, root: root, home: home}
	st.lookup(t)

	ws := workspace(t)
	s := session("swap", ws)
	gate, pidFile := filepath.Join(dir, "gate"), filepath.Join(dir, "pid")
	job := fmt.Sprintf(`echo $$ > %s; echo before; while [ ! -e %s ]; do sleep 0.02; done; echo after`, pidFile, gate)
	expect(t, st.bash(t, s, job, "run_in_background", true), "started background job bash-1", false)
	var pid int
	waitFor(t, "the job's pid", func() bool {
		b, err := os.ReadFile(pidFile)
		if err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		return err == nil && pid > 0
	})
	// Unconfined before the swap.
	local := filepath.Join(ws, "local")
	expect(t, st.bash(t, s, "touch "+local+" && echo unconfined"), "unconfined\n", false)

	n, _ := attempts()
	writeAtomically(t, path, fmt.Sprintf(swapProfile, home, "bash-sandbox", root))
	waitFor(t, "the reload", func() bool {
		k, err := attempts()
		if k > n && err != nil {
			t.Fatalf("reload failed: %v", err)
		}
		return k > n
	})
	st.lookup(t) // every row active again, bash now bash-sandbox
	for _, row := range rt.Status().Rows {
		if row.ID == "bash" && row.Plugin != "bash-sandbox" {
			t.Fatalf("bash row runs %s", row.Plugin)
		}
	}

	target := filepath.Join(ws, "x")
	expect(t, st.bash(t, s, "touch "+target), deniedText("touch: cannot touch '"+target+"': Permission denied", "read-only"), false)
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the swap killed the job's process: %v", err)
	}
	expect(t, st.call(t, s, "job_list", `{}`), "bash-1 [bash] running — "+job, false)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	expect(t, st.call(t, s, "job_output", `{"job_id":"bash-1","wait":true,"timeout_ms":10000}`), "before\nafter\n[status: completed, exit code: 0]", false)
	// The job ran unconfined to the end (bash-local started it); new jobs are confined.
	expect(t, st.bash(t, s, "touch "+target, "run_in_background", true), "started background job bash-2", false)
	expect(t, st.call(t, s, "job_output", `{"job_id":"bash-2","wait":true,"timeout_ms":10000}`),
		"[stderr]\ntouch: cannot touch '"+target+"': Permission denied\n[sandbox: file access denied under read-only mode]\n"+
			"[sandbox: escalation available — retry this exact command once with sandbox_permissions (the narrowest wider mode that suffices) + justification; the approval prompt asks the user]\n"+
			"[status: completed, exit code: 1]", false)
}

// The other way, and a sandbox reconfigured: a job started confined keeps running — in
// its session's sandbox, still confined — while the profile swaps the executor to
// bash-local (new calls unconfined) and back to bash-sandbox with the network allowed
// (new calls in a new sandbox; the old one ends once the job is done); the job finishes
// with its full output.
func TestSwapSandboxToLocalWhileAJobRuns(t *testing.T) {
	rt := container.NewRuntime(catalog(t), container.Options{Logger: quietLogger()})
	root, home := canonTempDir(t), t.TempDir()
	t.Cleanup(func() {
		rt.Close()
		waitFor(t, "no child process left behind", func() bool { return len(children()) == 0 })
	})
	compose := func(executor string, cfg map[string]any) *stack {
		t.Helper()
		if err := rt.Compose("swap", stackRows(stackSetup{executor: executor, bashConfig: cfg}, root, home)); err != nil {
			t.Fatal(err)
		}
		st := &stack{rt: rt, root: root, home: home}
		st.lookup(t)
		return st
	}
	ww := map[string]any{"defaultMode": "workspace-write"}
	st := compose("", ww)
	ws := workspace(t)
	s := session("swap-back", ws)
	gate := filepath.Join(ws, "gate")
	job := `echo "$TMPDIR before"; while [ ! -e gate ]; do sleep 0.02; done; touch /root/dsh-swap-escape 2>/dev/null || echo "still confined"`
	expect(t, st.bash(t, s, job, "run_in_background", true), "started background job bash-1", false)
	waitFor(t, "the job to start", func() bool {
		return strings.HasPrefix(st.call(t, s, "job_output", `{"job_id":"bash-1"}`).Text, "/tmp before")
	})

	st = compose("bash-local", nil)
	expect(t, st.bash(t, s, "grep -c . /proc/self/status >/dev/null && echo local"), "local\n", false)
	st = compose("", map[string]any{"defaultMode": "workspace-write", "network": "allow"})
	expect(t, st.bash(t, s, "echo sandboxed"), "sandboxed\n", false)

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove("/root/dsh-swap-escape") })
	expect(t, st.call(t, s, "job_output", `{"job_id":"bash-1","wait":true,"timeout_ms":10000}`), "still confined\n[status: completed, exit code: 0]", false)
	if exists("/root/dsh-swap-escape") {
		t.Fatal("the job left its sandbox")
	}
}
