package bashsandbox_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/kits/limitstest"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
)

// limitsTarget is bash-sandbox, confining in workspace-write, for the limits kit.
var limitsTarget = limitstest.Target{
	Plugin:    bashsandbox.Plugin,
	Name:      "bash-sandbox",
	Config:    map[string]any{"defaultMode": "workspace-write"},
	Workspace: func(t testing.TB) string { return workspace(t) },
}

// The resource limits (docs/limits.md) through the bash tool, for confined commands: memory,
// processes, the session's shared memory, a job's memory, the CPU quota.
func TestLimits(t *testing.T) { limitstest.Run(t, limitsTarget) }

// A configured limit on a host without its controller fails the row (the defaults it
// cannot enforce are named in its status instead: TestLimitsDefaultsUnenforced).
func TestLimitsWithoutController(t *testing.T) {
	for _, key := range []string{"memory", "sessionProcesses"} {
		t.Run(key, func(t *testing.T) {
			limitstest.WithoutController(t, limitsTarget, key, map[string]any{"memory": "64MiB", "sessionProcesses": 10}[key])
		})
	}
}

// The defaults a host cannot enforce leave the row active, its status naming them.
func TestLimitsDefaultsUnenforced(t *testing.T) {
	row := limitstest.Row(t, limitstest.ComposeWithoutControllers(t, limitsTarget, nil))
	want := "; limits: the default processes and sessionProcesses limits are not enforced (no pids controller: cgroup v2 is not in use (no cgroup2 mount), and no cgroup v1 pids hierarchy is mounted)"
	if row.State != container.StateActive || !strings.HasSuffix(row.Detail, want) {
		t.Fatalf("row %s %q, want active with …%q", row.State, row.Detail, want)
	}
}

// The fork bomb of the defaults (processes 1024, sessionProcesses 4096) leaves another
// session's calls working while it runs, and nothing of it after.
func TestLimitsForkBomb(t *testing.T) {
	h := limitstest.Compose(t, limitsTarget, nil)
	bomb, other := h.Session("limits-bomb"), h.Session("limits-bystander")
	if res := h.Bash(other, "echo warm", nil); res.Text != "warm\n" {
		t.Fatalf("before: %q", res.Text)
	}
	done := make(chan string, 1)
	go func() { done <- h.Bash(bomb, ":(){ :|:& };:", map[string]any{"timeoutMs": 5000}).Text }()
	t.Cleanup(func() { <-done })
	session := sessionPidsDir(t, "limits-bomb")
	waitFor(t, "the bomb to reach its process limit", func() bool { return pidsCurrent(session) >= 1000 })
	if res := h.Bash(other, "echo ok", nil); res.Text != "ok\n" {
		t.Fatalf("another session during the bomb: %q", res.Text)
	}
	// The bomb's leader returns at once, the bomb running in the background: the call
	// ends once its output is drained (graceMs), and what reached the process limit
	// does not outlive it.
	text := <-done
	done <- text
	if !strings.HasSuffix(text, "\n[process limit of 1024 reached: new processes were refused]") {
		t.Fatalf("the bomb's result: …%q", tail(text, 400))
	}
	// Nothing of it is left: its cgroup is gone; the session holds only its box.
	if !proctest.Until(10*time.Second, func() bool {
		dirs, _ := filepath.Glob(filepath.Join(session, "c[0-9]*"))
		return len(dirs) == 1
	}) {
		dirs, _ := filepath.Glob(filepath.Join(session, "c[0-9]*"))
		for _, d := range dirs {
			procs, _ := os.ReadFile(d + "/cgroup.procs")
			t.Logf("%s: pids %d, procs %q", d, pidsCurrent(d), tail(string(procs), 200))
		}
		t.Fatal("the bomb's cgroup is still there")
	}
	// Processes, not tasks: the box's threads (which its Go runtime adds under load)
	// count in pids.current too.
	if procs := sessionProcs(session); len(procs) != 1 {
		t.Fatalf("processes left in the bomb's session: %v (want its box alone)", procs)
	}
	if res := h.Bash(bomb, "echo after", nil); res.Text != "after\n" {
		t.Fatalf("the bomb's session after: %q", res.Text)
	}
}

// Filling the private /tmp (or /dev/shm) past tmpSize fails inside the command with
// ENOSPC; the host's disk is untouched.
func TestLimitsTmpSize(t *testing.T) {
	h := limitstest.Compose(t, limitsTarget, map[string]any{"tmpSize": "8MiB"})
	s := h.Session("limits-tmp")
	name := fmt.Sprintf("dsh-fill-%d", os.Getpid())
	for _, dir := range []string{"/tmp", "/dev/shm"} {
		res := h.Bash(s, "dd if=/dev/zero of="+dir+"/"+name+" bs=1M count=20 2>&1 | grep -o 'No space left on device'; ls -l "+dir+"/"+name+" | awk '{print $5}'", nil)
		if res.Text != "No space left on device\n8388608\n" {
			t.Fatalf("filling %s: %q", dir, res.Text)
		}
	}
	if exists(filepath.Join(os.TempDir(), name)) {
		t.Fatal("the write reached the host's /tmp")
	}
	if matches, _ := filepath.Glob(filepath.Join(os.TempDir(), "dsh-sandbox-"+strconv.Itoa(os.Getpid())+"-*", "s*", "tmp", name)); len(matches) != 0 {
		t.Fatalf("the write reached the host: %q", matches)
	}
}

// sessionPidsDir is the pids cgroup of session id of this process's Supervisors.
func sessionPidsDir(t *testing.T, id string) string {
	t.Helper()
	own := proctest.OwnCgroupV1(t, "pids")
	var dir string
	waitFor(t, "the session's pids cgroup", func() bool {
		matches, _ := filepath.Glob(filepath.Join(own, "dsh-"+strconv.Itoa(os.Getpid())+"-*", "s-"+id))
		if len(matches) == 1 {
			dir = matches[0]
		}
		return dir != ""
	})
	return dir
}

// sessionProcs are the processes (thread-group leaders) in the cgroup dir and below.
func sessionProcs(dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			b, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			out = append(out, strings.Fields(string(b))...)
		}
		return nil
	})
	return out
}

func pidsCurrent(dir string) int {
	b, _ := os.ReadFile(filepath.Join(dir, "pids.current"))
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Confined commands are the OOM killer's first choice from their first instruction:
// the box raised its own oom_score_adj, which every command inherits.
func TestLimitsConfinedOOMScore(t *testing.T) {
	h := limitstest.Compose(t, limitsTarget, nil)
	if res := h.Bash(h.Session("limits-oom"), "cat /proc/self/oom_score_adj", nil); res.Text != "1000\n" {
		t.Fatalf("oom_score_adj %q", res.Text)
	}
}
