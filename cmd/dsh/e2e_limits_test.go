package main_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/internal/proctest"
)

// dsh survives what its commands do under limits around it (a container's
// --pids-limit or memory limit, systemd's TasksMax or MemoryMax): each test runs the
// built binary, with its default profile (bash-local, no limits configured), inside a
// cgroup v1 of its own that it makes below this process's (and removes), so that no
// other test shares it.

// limitCgroup makes a cgroup below this process's own in controller's hierarchy with
// file set to value, and removes it (once empty) when the test ends.
func limitCgroup(t *testing.T, controller, file, value string) string {
	t.Helper()
	dir := filepath.Join(proctest.OwnCgroupV1(t, controller), fmt.Sprintf("dsh-e2e-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a %s cgroup: %v", controller, err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for os.Remove(dir) != nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // what dsh left exits (its watchdog, its sweep)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
		t.Fatalf("%s/%s: %v", dir, file, err)
	}
	return dir
}

// serveIn starts `dsh serve` (the default profile) inside the cgroup dir, connected
// over stdio.
func serveIn(t *testing.T, dir string) (*mcp.ClientSession, *exec.Cmd, *syncBuffer) {
	t.Helper()
	stderr := &syncBuffer{}
	// The shell moves itself into the cgroup, then becomes dsh: dsh and all it starts
	// live there from its first instruction.
	cmd := exec.Command("sh", "-c", `echo $$ > "$1/cgroup.procs" && shift && exec "$@"`, "sh", dir, dshBin, "serve")
	cmd.Env = append(os.Environ(), "DSH_HOME="+t.TempDir())
	cmd.Dir = t.TempDir()
	cmd.Stderr = stderr
	cl := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := cl.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: sessionRevision})
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		cs.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Wait()
		}
	})
	return cs, cmd, stderr
}

func bashCall(t *testing.T, cs *mcp.ClientSession, command string, timeoutMs int) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
		"command": command, "description": "Run a command under a limit", "timeoutMs": timeoutMs}})
	if err != nil {
		t.Fatalf("call %q: %v", command, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return text.String(), res.IsError
}

// dsh in a pids cgroup of 100, with a fork-bomb call, 10 runs: dsh is alive after each
// and the next call works. Its commands get a pids cgroup whose limit leaves dsh a
// reserve, so the bomb cannot take the threads dsh needs to end it.
func TestLimitsDshSurvivesAForkBombUnderAPidsLimit(t *testing.T) {
	for run := 1; run <= 10; run++ {
		t.Run(strconv.Itoa(run), func(t *testing.T) {
			dir := limitCgroup(t, "pids", "pids.max", "100")
			cs, cmd, stderr := serveIn(t, dir)
			text, isErr := bashCall(t, cs, ":(){ :|:& };:", 3000)
			if isErr || !strings.Contains(text, "[process limit of ") || !strings.Contains(text, " reached: new processes were refused]") {
				t.Fatalf("the bomb's result (error %v): …%q", isErr, tail(text, 300))
			}
			if err := cmd.Process.Signal(syscall.Signal(0)); err != nil || !alive(cmd.Process.Pid) {
				t.Fatalf("dsh died: %v\nstderr:\n%s", err, stderr.String())
			}
			if text, isErr := bashCall(t, cs, "echo ok", 10000); isErr || text != "ok\n" {
				t.Fatalf("the next call: %q (error %v)\nstderr:\n%s", text, isErr, stderr.String())
			}
			if strings.Contains(stderr.String(), "pthread_create failed") || strings.Contains(stderr.String(), "fatal error") {
				t.Fatalf("dsh's stderr:\n%s", stderr.String())
			}
			peak, _ := os.ReadFile(filepath.Join(dir, "pids.peak"))
			t.Logf("run %d: dsh alive, the next call works; the cgroup's peak %s of 100 pids; the bomb: …%q", run, strings.TrimSpace(string(peak)), tail(text, 80))
		})
	}
}

// dsh in a memory cgroup of 128 MiB, with 20 × 12 MB processes in one call: the OOM
// killer ends commands (oom_score_adj 1000), never dsh; the result says which limit
// killed them, and the next call works.
func TestLimitsDshSurvivesCommandsUnderAMemoryLimit(t *testing.T) {
	dir := limitCgroup(t, "memory", "memory.limit_in_bytes", strconv.Itoa(128<<20))
	if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), []byte(strconv.Itoa(128<<20)), 0o644)
	}
	cs, cmd, stderr := serveIn(t, dir)
	text, isErr := bashCall(t, cs, `for i in $(seq 20); do perl -e '$x = "a"; $x x= (12 << 20); sleep 5' & done; wait; echo done`, 60000)
	if isErr || !strings.Contains(text, "[killed: memory limit of 128 MiB reached]") || !strings.HasPrefix(text, "done\n") && !strings.Contains(text, "\ndone\n") {
		t.Fatalf("the call's result (error %v): %q\nstderr:\n%s", isErr, text, stderr.String())
	}
	if !alive(cmd.Process.Pid) {
		t.Fatalf("dsh died\nstderr:\n%s", stderr.String())
	}
	if text, isErr := bashCall(t, cs, "echo ok", 10000); isErr || text != "ok\n" {
		t.Fatalf("the next call: %q (error %v)", text, isErr)
	}
	oom, _ := os.ReadFile(filepath.Join(dir, "memory.oom_control"))
	peak, _ := os.ReadFile(filepath.Join(dir, "memory.max_usage_in_bytes"))
	t.Logf("the call: …%q; the cgroup's peak %s bytes, %s", tail(text, 200), strings.TrimSpace(string(peak)), strings.ReplaceAll(strings.TrimSpace(string(oom)), "\n", ", "))
}

// `dsh status` names the mechanism of an executor's limits; `dsh check` refuses a
// limit that is not a limit.
func TestLimitsStatusAndCheck(t *testing.T) {
	dir := t.TempDir()
	profile := filepath.Join(dir, "limits.yaml")
	write := func(limits string) {
		t.Helper()
		text := "extends: default\nplugins:\n  - id: bash\n    name: bash-local\n    config:\n      limits: " + limits + "\n"
		if err := os.WriteFile(profile, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{memory: 512MiB, processes: 100}`)
	out, errOut, code := runDsh(t, dir, "check", "--profile", profile)
	if code != 0 {
		t.Fatalf("check: %d %s %s", code, out, errOut)
	}
	out, errOut, code = runDsh(t, dir, "status", "--profile", profile)
	if code != 0 || !strings.Contains(out, "limits: cgroup v") || !strings.Contains(out, "(memory, pids)") {
		t.Fatalf("status: %d\n%s\n%s", code, out, errOut)
	}
	write(`{memory: lots}`)
	_, errOut, code = runDsh(t, dir, "check", "--profile", profile)
	if code == 0 || !strings.Contains(errOut, `bash-local: limits.memory must be a number of bytes or a size such as "512MiB"`) {
		t.Fatalf("check of a bad limit: %d %s", code, errOut)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
