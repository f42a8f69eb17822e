package main_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/internal/proctest"
)

// Faults injected into a running `dsh serve`, through the built binary: what is at the
// profile path, what happens to its directory, how clients misbehave, how dsh is told
// to stop. Each test checks dsh's answer and that nothing it started is left.

// treeOf lists what must be gone once dsh (pid) has exited: its descendants and its
// crash-cleanup watchdog (no descendant: it names dsh's cgroup directory).
func treeOf(pid int) []int {
	procs := proctest.Processes()
	children := map[int][]int{}
	for _, p := range procs {
		children[p.Ppid] = append(children[p.Ppid], p.Pid)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	mark := []byte("/dsh-" + strconv.Itoa(pid) + "-")
	for _, p := range procs {
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/cmdline")
		if strings.Contains(string(cmd), "__dsh_subprocess_watchdog") && strings.Contains(string(cmd), string(mark)) && !slices.Contains(out, p.Pid) {
			out = append(out, p.Pid)
		}
	}
	return out
}

// wantGone fails t unless every pid is gone within 10 s.
func wantGone(t *testing.T, pids []int) {
	t.Helper()
	var left []int
	proctest.Until(10*time.Second, func() bool {
		left = left[:0]
		for _, p := range pids {
			if !proctest.Gone(p) {
				left = append(left, p)
			}
		}
		return len(left) == 0
	})
	if len(left) > 0 {
		t.Errorf("left running: %s", proctest.Describe(left))
		proctest.KillPids(left...)
	}
}

// rssKB is pid's resident set size in kB.
func rssKB(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return atoiOrFail(t, strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	t.Fatalf("no VmRSS for %d", pid)
	return 0
}

// fdCount is the number of descriptors pid holds.
func fdCount(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// serveStatus is dsh://status as a client reads it.
type serveStatus struct {
	Rows []struct {
		ID, Plugin, State, Detail string
	} `json:"rows"`
	LastReloadError string `json:"lastReloadError"`
}

func readStatus(t *testing.T, cs *mcp.ClientSession) serveStatus {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "dsh://status"})
	if err != nil {
		t.Fatal(err)
	}
	var st serveStatus
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// hasTool reports whether the client's tool list holds name.
func hasTool(t *testing.T, c *client, name string) bool {
	t.Helper()
	return slices.Contains(c.toolNames(t), name)
}

const (
	withJobs    = "extends: default\n"
	withoutJobs = "extends: default\nplugins:\n  - id: jobs\n    disabled: true\n"
)

// closeAndWait closes the client (dsh's stdin) and wants dsh to exit 0 by itself, before
// the client's 5 s grace for a SIGTERM.
func closeAndWait(t *testing.T, c *client) {
	t.Helper()
	start := time.Now()
	c.Close()
	if d := time.Since(start); d > 4*time.Second || c.cmd.ProcessState == nil || c.cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("dsh after the end of its input: %v after %s\nstderr:\n%s", c.cmd.ProcessState, d, c.stderr.String())
	}
}

// A named pipe at the profile path: the reload fails naming it (status says so), calls
// keep working, a regular file written there again is applied, and with a named pipe
// there dsh still ends at the end of its input.
func TestServeProfileNamedPipe(t *testing.T) {
	profile := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(profile, []byte(withJobs), 0o644)
	c := startServe(t, clientOptions{}, "--workspace", t.TempDir(), "--profile", profile)
	pid := c.cmd.Process.Pid
	os.Remove(profile)
	if err := syscall.Mkfifo(profile, 0o644); err != nil {
		t.Fatal(err)
	}
	want := profile + ": not a regular file (a named pipe): a profile must be a regular file"
	waitFor(t, 20*time.Second, "the named-pipe error in status", func() bool {
		return strings.Contains(readStatus(t, c.ClientSession).LastReloadError, want)
	})
	if text, _, _ := c.call(t, "bash", map[string]any{"command": "echo alive", "description": "Check it still works"}); text != "alive\n" {
		t.Errorf("a call with a named pipe at the profile path: %q", text)
	}
	os.Remove(profile)
	os.WriteFile(profile, []byte(withoutJobs), 0o644)
	waitFor(t, 20*time.Second, "the profile written after the pipe", func() bool { return !hasTool(t, c, "job_list") })
	if e := readStatus(t, c.ClientSession).LastReloadError; e != "" {
		t.Errorf("lastReloadError after the fix: %q", e)
	}
	os.Remove(profile)
	syscall.Mkfifo(profile, 0o644)
	waitFor(t, 20*time.Second, "the second named-pipe error", func() bool {
		return strings.Contains(readStatus(t, c.ClientSession).LastReloadError, want)
	})
	tree := treeOf(pid)
	closeAndWait(t, c)
	wantGone(t, tree)
}

// The profile's directory renamed away and replaced by a new one with another profile
// (`mv conf conf.old; mkdir conf; cp new conf/p.yaml`): the new profile is applied, and
// later edits of it too; never the old configuration shown as fine.
func TestServeProfileDirectoryReplaced(t *testing.T) {
	base := t.TempDir()
	conf := filepath.Join(base, "conf")
	os.Mkdir(conf, 0o755)
	profile := filepath.Join(conf, "p.yaml")
	os.WriteFile(profile, []byte(withJobs), 0o644)
	c := startServe(t, clientOptions{}, "--workspace", t.TempDir(), "--profile", profile)
	if err := os.Rename(conf, conf+".old"); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(conf, 0o755)
	os.WriteFile(profile, []byte(withoutJobs), 0o644)
	waitFor(t, 20*time.Second, "the new directory's profile", func() bool { return !hasTool(t, c, "job_list") })
	os.WriteFile(profile, []byte(withJobs), 0o644)
	waitFor(t, 20*time.Second, "an edit in the new directory", func() bool { return hasTool(t, c, "job_list") })
	// The grandparent replaced: the directory keeps its name, so only the periodic
	// check sees it.
	if err := os.Rename(base, base+".moved"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base + ".moved") })
	os.MkdirAll(conf, 0o755)
	os.WriteFile(profile, []byte(withoutJobs), 0o644)
	waitFor(t, 20*time.Second, "the replaced parent's profile", func() bool { return !hasTool(t, c, "job_list") })
	if st := readStatus(t, c.ClientSession); st.LastReloadError != "" {
		t.Errorf("lastReloadError: %q", st.LastReloadError)
	}
	closeAndWait(t, c)
}

// A profile made unreadable is a reload error; made readable again (a mode change, no
// write) the error clears. dsh runs as nobody here: root reads any file.
func TestServeProfileReadableAgain(t *testing.T) {
	if _, err := os.Stat("/usr/bin/setpriv"); err != nil {
		t.Skip("setpriv is not installed")
	}
	// Directories nobody can reach: the binary's, the workspace, the home.
	os.Chmod(filepath.Dir(dshBin), 0o755)
	open := func() string {
		dir, err := os.MkdirTemp("", "dsh-e2e-nobody-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		os.Chmod(dir, 0o777)
		return dir
	}
	dir, ws, home := open(), open(), open()
	profile := filepath.Join(dir, "p.yaml")
	os.WriteFile(profile, []byte(withJobs), 0o644)
	c := startServe(t, clientOptions{
		wrap: []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"},
		env:  []string{"DSH_HOME=" + home, "TMPDIR=" + ws},
	}, "--workspace", ws, "--profile", profile)
	if err := os.Chmod(profile, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the permission error", func() bool {
		return strings.Contains(readStatus(t, c.ClientSession).LastReloadError, "permission denied")
	})
	os.Chmod(profile, 0o644)
	waitFor(t, 20*time.Second, "the error cleared by the mode change", func() bool {
		return readStatus(t, c.ClientSession).LastReloadError == ""
	})
	closeAndWait(t, c)
}
