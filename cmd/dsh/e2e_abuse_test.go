package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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
// crash-cleanup watchdogs (no descendants: found by dsh's cgroup directory in their
// arguments, or by the pipe dsh holds to them).
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
	for _, w := range pipeWatchdogs(pid) {
		if !slices.Contains(out, w) {
			out = append(out, w)
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

// warmUpCall runs one bash call, so that what dsh makes on its first (the watchdog, a
// spare cgroup, the pipe pool) is there before a test counts its descriptors.
func warmUpCall(t *testing.T, c *client) {
	t.Helper()
	if text, _, _ := c.call(t, "bash", map[string]any{"command": "echo warm", "description": "Warm up"}); text != "warm\n" {
		t.Fatalf("the warm-up call: %q", text)
	}
}

// wantBackTo wants dsh (pid), after what, back to fds descriptors within 5 s — allowing
// the pipe pool, which may fill after they were counted (see
// TestServeWatchdogDeathIsSupervised) — and its RSS within 16 MB of rss kB. What the
// callers repeat 5 to 22 times: a descriptor leaked each time is past the allowance;
// 16 MB is far above a reload's garbage, far below a composition or a profile read
// kept per attempt, or a watch loop that allocates as it spins.
func wantBackTo(t *testing.T, pid, fds, rss int, what string) {
	t.Helper()
	const pool = 4
	if !proctest.Until(5*time.Second, func() bool { return fdCount(t, pid) <= fds+pool }) {
		t.Errorf("dsh holds %d descriptors after %s, %d before", fdCount(t, pid), what, fds)
	}
	now := rssKB(t, pid)
	if now-rss > 16<<10 {
		t.Errorf("RSS grew by %d kB after %s (%d kB before)", now-rss, what, rss)
	}
	t.Logf("after %s: %d descriptors (%d before), RSS %d kB (%d kB before)", what, fdCount(t, pid), fds, now, rss)
}

// A named pipe at the profile path: the reload fails naming it (status says so), calls
// keep working, a regular file written there again is applied, and with a named pipe
// there dsh still ends at the end of its input. Reloads of the named pipe, again and
// again, cost dsh no descriptor and no memory.
func TestServeProfileNamedPipe(t *testing.T) {
	profile := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(profile, []byte(withJobs), 0o644)
	c := startServe(t, clientOptions{}, "--workspace", t.TempDir(), "--profile", profile)
	pid := c.cmd.Process.Pid
	warmUpCall(t, c)
	fds, rss := fdCount(t, pid), rssKB(t, pid)
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
	// Twenty more failed reloads, each opening the named pipe (a mode change is an event).
	for i := range 20 {
		failed := strings.Count(c.stderr.String(), "profile reload failed")
		os.Chmod(profile, []os.FileMode{0o600, 0o644}[i%2])
		waitFor(t, 20*time.Second, "a reload of the named pipe", func() bool {
			return strings.Count(c.stderr.String(), "profile reload failed") > failed
		})
	}
	wantBackTo(t, pid, fds, rss, "22 reloads of a named pipe")
	tree := treeOf(pid)
	closeAndWait(t, c)
	wantGone(t, tree)
}

// The profile's directory renamed away and replaced by a new one with another profile
// (`mv conf conf.old; mkdir conf; cp new conf/p.yaml`): the new profile is applied, and
// later edits of it too; never the old configuration shown as fine. Replaced again and
// again, it costs dsh no descriptor and no memory.
func TestServeProfileDirectoryReplaced(t *testing.T) {
	base := t.TempDir()
	conf := filepath.Join(base, "conf")
	os.Mkdir(conf, 0o755)
	profile := filepath.Join(conf, "p.yaml")
	os.WriteFile(profile, []byte(withJobs), 0o644)
	c := startServe(t, clientOptions{}, "--workspace", t.TempDir(), "--profile", profile)
	pid := c.cmd.Process.Pid
	warmUpCall(t, c)
	fds, rss := fdCount(t, pid), rssKB(t, pid)
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
	// Ten more replacements, each applied: each directory watched in turn.
	for i := range 10 {
		if err := os.Rename(conf, fmt.Sprintf("%s.old%d", conf, i)); err != nil {
			t.Fatal(err)
		}
		os.Mkdir(conf, 0o755)
		jobs := i%2 == 1
		os.WriteFile(profile, []byte(map[bool]string{true: withJobs, false: withoutJobs}[jobs]), 0o644)
		waitFor(t, 20*time.Second, fmt.Sprintf("replacement %d applied", i), func() bool { return hasTool(t, c, "job_list") == jobs })
	}
	wantBackTo(t, pid, fds, rss, "13 replacements of the profile's directory")
	tree := treeOf(pid)
	closeAndWait(t, c)
	wantGone(t, tree)
}

// A profile made unreadable is a reload error; made readable again (a mode change, no
// write) the error clears — five times over, at no cost in descriptors or memory. dsh
// runs as nobody here: root reads any file.
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
	pid := c.cmd.Process.Pid // setpriv execs dsh
	warmUpCall(t, c)
	fds, rss := fdCount(t, pid), rssKB(t, pid)
	for range 5 { // each failed open costs nothing: checked after five
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
	}
	wantBackTo(t, pid, fds, rss, "five unreadable profiles")
	tree := treeOf(pid)
	closeAndWait(t, c)
	wantGone(t, tree)
}

// rawStdio is `dsh serve` on stdio pipes the test controls entirely: it may stop
// reading dsh's output, or close it.
type rawStdio struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *os.File // the test's end of dsh's stdout
	r      *bufio.Reader
	stderr *syncBuffer
}

func startRawStdio(t *testing.T, env []string, args ...string) *rawStdio {
	t.Helper()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &rawStdio{cmd: exec.Command(dshBin, append([]string{"serve"}, args...)...), out: outR, r: bufio.NewReaderSize(outR, 1<<20), stderr: &syncBuffer{}}
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stdout, s.cmd.Stderr = outW, s.stderr
	if s.in, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	t.Cleanup(func() { s.cmd.Process.Kill(); s.cmd.Wait(); outR.Close() })
	return s
}

func (s *rawStdio) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// await returns the first line dsh writes that contains want.
func (s *rawStdio) await(t *testing.T, want string) string {
	t.Helper()
	s.out.SetReadDeadline(time.Now().Add(60 * time.Second))
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("waiting for %q: %v\nstderr:\n%s", want, err, s.stderr.String())
		}
		if strings.Contains(line, want) {
			return strings.TrimSuffix(line, "\n")
		}
	}
}

// awaitIDs returns the answers to the calls ids, in whatever order they come.
func (s *rawStdio) awaitIDs(t *testing.T, ids ...int) map[int]string {
	t.Helper()
	got := map[int]string{}
	for len(got) < len(ids) {
		line := s.await(t, `"id":`)
		var msg struct{ ID *int }
		if json.Unmarshal([]byte(line), &msg) == nil && msg.ID != nil && slices.Contains(ids, *msg.ID) {
			got[*msg.ID] = line
		}
	}
	return got
}

func (s *rawStdio) initialize(t *testing.T, version string) {
	t.Helper()
	s.send(t, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	s.await(t, `"id":"init"`)
	s.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

func (s *rawStdio) call(t *testing.T, id int, command string) {
	t.Helper()
	args, _ := json.Marshal(map[string]any{"name": "bash", "arguments": map[string]any{"command": command, "description": "A test command"}})
	s.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, id, args))
}

// waitExit wants dsh to exit 0 by itself within 30 s.
func (s *rawStdio) waitExit(t *testing.T) {
	t.Helper()
	wantExitZero(t, s.cmd, s.stderr, 30*time.Second)
}

// entries lists dir's entries.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// sandboxedServe starts `dsh serve --profile sandbox` with a temp dir of its own and
// makes it create what a shutdown must remove: a spill file (an output past the
// capture) and a session's sandbox directory. It returns dsh's tree and the temp dir.
func sandboxedServe(t *testing.T) (*rawStdio, []int, string) {
	t.Helper()
	tmp := t.TempDir()
	s := startRawStdio(t, []string{"TMPDIR=" + tmp}, "--workspace", t.TempDir(), "--profile", "sandbox")
	s.initialize(t, sessionRevision)
	s.call(t, 2, "head -c 200000 /dev/zero | tr '\\0' x; sleep 300 & echo started")
	s.await(t, `"id":2`)
	if names := entries(t, tmp); len(names) < 2 {
		t.Fatalf("the temp dir holds %q: want a spill directory and a sandbox directory", names)
	}
	return s, treeOf(s.cmd.Process.Pid), tmp
}

// SIGHUP (the terminal or the session that started dsh went away) is a graceful stop:
// exit 0, every process gone, the spill and sandbox directories removed.
func TestServeSIGHUPShutsDownGracefully(t *testing.T) {
	s, tree, tmp := sandboxedServe(t)
	s.cmd.Process.Signal(syscall.SIGHUP)
	s.waitExit(t)
	wantGone(t, tree)
	if names := entries(t, tmp); len(names) != 0 {
		out, _ := exec.Command("find", tmp).Output()
		t.Errorf("left in the temp dir after SIGHUP: %q\n%s", names, out)
	}
}

// The client closing dsh's stdout: the next write fails (EPIPE, no SIGPIPE death) and
// dsh shuts down gracefully, as at the end of its input.
func TestServeClosedOutputShutsDownGracefully(t *testing.T) {
	s, tree, tmp := sandboxedServe(t)
	s.out.Close()
	s.send(t, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	s.waitExit(t)
	wantGone(t, tree)
	if names := entries(t, tmp); len(names) != 0 {
		t.Errorf("left in the temp dir after the output closed: %q", names)
	}
	if !strings.Contains(s.stderr.String(), "the client closed dsh's output; shutting down") {
		t.Errorf("stderr:\n%s", s.stderr.String())
	}
}

// A client that writes and does not read: 40,000 pings. dsh stops reading while its
// answers pile up, so its memory stays bounded; once the client reads, every ping is
// answered once, and dsh is back to its descriptors.
func TestServeNonReadingClientStaysBounded(t *testing.T) {
	s := startRawStdio(t, nil, "--workspace", t.TempDir())
	pid := s.cmd.Process.Pid
	s.initialize(t, sessionRevision)
	s.send(t, `{"jsonrpc":"2.0","id":0,"method":"ping"}`)
	s.await(t, `"id":0`)
	rss, fds := rssKB(t, pid), fdCount(t, pid)
	const n = 40000
	written := make(chan error, 1)
	go func() {
		w := bufio.NewWriter(s.in)
		for i := 1; i <= n; i++ {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`+"\n", i)
		}
		written <- w.Flush()
	}()
	// dsh's input pipe fills once it stops reading: the writer blocks.
	select {
	case err := <-written:
		t.Fatalf("dsh read all %d pings without any being read back (%v)", n, err)
	case <-time.After(3 * time.Second):
	}
	if grown := rssKB(t, pid) - rss; grown > 16<<10 {
		t.Errorf("RSS grew by %d kB with %d pings unread (%d kB before)", grown, n, rss)
	}
	t.Logf("RSS %d kB before, %d kB with the pings unread", rss, rssKB(t, pid))
	answered := map[int]bool{}
	for len(answered) < n {
		var id int
		line := s.await(t, `"id":`)
		if _, err := fmt.Sscanf(line, `{"jsonrpc":"2.0","id":%d,"result":{}}`, &id); err != nil || id < 1 || id > n || answered[id] {
			t.Fatalf("answer %d: %s", len(answered), line)
		}
		answered[id] = true
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if grown := rssKB(t, pid) - rss; grown > 32<<10 {
		t.Errorf("RSS grew by %d kB after %d pings", grown, n)
	}
	if now := fdCount(t, pid); now > fds {
		t.Errorf("dsh holds %d descriptors, %d before", now, fds)
	}
	tree := treeOf(pid)
	s.in.Close()
	s.waitExit(t)
	wantGone(t, tree)
}

// stdio refusals through the binary: a duplicate id of a call in flight gets its error
// (the call in flight is untouched), an id of 1.5 is not answered as 1, and a batch is
// refused on 2025-11-25 (10,000 calls: none runs, and none holds a descriptor) but
// served on 2025-03-26.
func TestServeStdioRefusals(t *testing.T) {
	ws := t.TempDir()
	s := startRawStdio(t, nil, "--workspace", ws)
	pid := s.cmd.Process.Pid
	s.initialize(t, sessionRevision)
	s.call(t, 1, "echo warm") // what dsh makes on its first call is there before it counts
	s.await(t, `"id":1`)
	fds := fdCount(t, pid)
	gate := filepath.Join(ws, "gate")
	s.call(t, 5, "while [ ! -e "+gate+" ]; do sleep 0.01; done; echo first")
	s.call(t, 5, "echo second > second")
	if line := s.await(t, `"error"`); line != `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: id 5 is in use by a request in flight"}}` {
		t.Errorf("a duplicate id: %s", line)
	}
	os.WriteFile(gate, nil, 0o600)
	if line := s.await(t, `"id":5`); !strings.Contains(line, `"text":"first\n"`) {
		t.Errorf("the call in flight: %s", line)
	}
	if _, err := os.Stat(filepath.Join(ws, "second")); !os.IsNotExist(err) {
		t.Errorf("the duplicate ran: %v", err)
	}
	s.send(t, `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`)
	if line := s.await(t, `"error"`); line != `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: not a JSON-RPC 2.0 message: \"id\" must be a string or an integer, got 1.5"}}` {
		t.Errorf("id 1.5: %s", line)
	}
	calls := make([]string, 10000)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo run >> ran","description":"Count"}}}`, i+100)
	}
	s.send(t, "["+strings.Join(calls, ",")+"]")
	if line := s.await(t, `"error"`); line != `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: JSON-RPC batching is not supported in 2025-06-18 and later (this session's version: 2025-11-25)"}}` {
		t.Errorf("a batch on 2025-11-25: %.300s", line)
	}
	s.send(t, `{"jsonrpc":"2.0","id":6,"method":"ping"}`)
	s.await(t, `"id":6`)
	if _, err := os.Stat(filepath.Join(ws, "ran")); !os.IsNotExist(err) {
		t.Errorf("the refused batch ran commands: %v", err)
	}
	// Neither the refused duplicate nor the refused batch holds a descriptor (a stream or
	// a slot kept per refused call would be one or 10,000); the allowance is the pipe pool
	// (see TestServeWatchdogDeathIsSupervised).
	const pool = 4
	if !proctest.Until(5*time.Second, func() bool { return fdCount(t, pid) <= fds+pool }) {
		t.Errorf("dsh holds %d descriptors after the refusals, %d before", fdCount(t, pid), fds)
	}
	tree := treeOf(pid)
	s.in.Close()
	s.waitExit(t)
	wantGone(t, tree)

	old := startRawStdio(t, nil, "--workspace", ws)
	old.initialize(t, "2025-03-26")
	old.send(t, "["+strings.Join(calls[:3], ",")+"]")
	if line := old.await(t, `"id":10`); !strings.HasPrefix(line, "[") || strings.Count(line, `"exitCode":0`) != 3 {
		t.Errorf("a batch on 2025-03-26: %.600s", line)
	}
	tree = treeOf(old.cmd.Process.Pid)
	old.in.Close()
	old.waitExit(t)
	wantGone(t, tree)
}

// SIGTERM with stdio calls in flight: each is answered "Error: tool call aborted"
// before dsh exits 0, and their processes are gone.
func TestServeStdioSigtermAnswersCallsInFlight(t *testing.T) {
	ws := t.TempDir()
	s := startRawStdio(t, nil, "--workspace", ws)
	s.initialize(t, sessionRevision)
	var pids []int
	for i := range 5 {
		s.call(t, 10+i, fmt.Sprintf("echo $$ > pid%d; exec sleep 300", i))
	}
	for i := range 5 {
		pids = append(pids, readPidFile(t, filepath.Join(ws, fmt.Sprintf("pid%d", i))))
	}
	tree := treeOf(s.cmd.Process.Pid)
	s.cmd.Process.Signal(syscall.SIGTERM)
	for id, line := range s.awaitIDs(t, 10, 11, 12, 13, 14) {
		if !strings.Contains(line, `"text":"Error: tool call aborted"`) {
			t.Errorf("call %d in flight at SIGTERM: %.300s", id, line)
		}
	}
	s.waitExit(t)
	wantGone(t, append(pids, tree...))
}

// --max-calls bounds the tool calls running at once across every session: a call beyond
// it is answered at once with a tool error, and a slot freed is usable again. A batch
// of 1,000 calls (on 2025-03-26, which has batches) runs no more commands than that, and
// dsh's descriptors come back to their level.
func TestServeCallLimit(t *testing.T) {
	ws := t.TempDir()
	s := startRawStdio(t, nil, "--workspace", ws, "--max-calls", "3")
	s.initialize(t, "2025-03-26")
	gate := filepath.Join(ws, "gate")
	for i := range 3 {
		s.call(t, 10+i, fmt.Sprintf("echo $$ > pid%d; while [ ! -e %s ]; do sleep 0.01; done", i, gate))
	}
	for i := range 3 {
		readPidFile(t, filepath.Join(ws, fmt.Sprintf("pid%d", i)))
	}
	s.call(t, 20, "echo beyond")
	if line := s.await(t, `"id":20`); !strings.Contains(line, `"text":"Error: tool call limit reached: 3 calls are running in this harness (--max-calls)"`) || !strings.Contains(line, `"isError":true`) {
		t.Errorf("a call beyond the limit: %s", line)
	}
	os.WriteFile(gate, nil, 0o600)
	s.awaitIDs(t, 10, 11, 12)
	s.call(t, 21, "echo again")
	if line := s.await(t, `"id":21`); !strings.Contains(line, `"text":"again\n"`) {
		t.Errorf("a call after the slots were freed: %s", line)
	}
	s.in.Close()
	s.waitExit(t)

	srv := startHTTPServe(t, "--workspace", ws, "--max-calls", "20", "--token-file", writeTokens(t, testToken))
	pid := srv.cmd.Process.Pid
	_, sid := post(t, srv.url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	post(t, srv.url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	calls := make([]string, 1000)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"bash","arguments":{"command":"sleep 0.5","description":"Hold a slot"}}}`, i+10)
	}
	// A first batch fills what the Supervisor keeps for reuse (free cgroups, pipes):
	// the level to come back to is after it.
	post(t, srv.url, sid, "["+strings.Join(calls[:40], ",")+"]")
	base := fdCount(t, pid)
	peak := 0
	done := make(chan string, 1)
	go func() {
		body, _ := post(t, srv.url, sid, "["+strings.Join(calls, ",")+"]")
		done <- body
	}()
	var body string
	for body == "" {
		select {
		case body = <-done:
		case <-time.After(20 * time.Millisecond):
			peak = max(peak, fdCount(t, pid))
		}
	}
	ran, refused := strings.Count(body, `"text":"(no output)"`), strings.Count(body, "tool call limit reached: 20 calls")
	if ran+refused != 1000 || ran < 20 || refused < 500 {
		t.Errorf("a 1,000-call batch under --max-calls 20: %d ran, %d refused", ran, refused)
	}
	if peak > base+20*8+32 {
		t.Errorf("dsh held %d descriptors during the batch, %d before", peak, base)
	}
	waitFor(t, 20*time.Second, "dsh's descriptors back to their level", func() bool { return fdCount(t, pid) <= base+2 })
}

// An approval question answered with a JSON-RPC error is reported as that error (not as
// a missing channel); one left unanswered is cancelled after --approval-timeout, and
// the call ends as cancelled. Nothing runs in either case.
func TestServeApprovalFailures(t *testing.T) {
	ws := t.TempDir()
	var mu sync.Mutex
	answer := func(context.Context) (*mcp.ElicitResult, error) { return nil, errors.New("the user interface crashed") }
	c := startServe(t, clientOptions{elicit: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		a := answer
		mu.Unlock()
		return a(ctx)
	}}, "--profile", "sandbox", "--sandbox-mode", "read-only", "--workspace", ws, "--approval-timeout", "1s")
	escalate := map[string]any{"command": "touch marker", "description": "Create a marker file",
		"sandbox_permissions": "workspace-write", "justification": "The marker must be created in the workspace."}
	text, isErr, _ := c.call(t, "bash", escalate)
	if !isErr || !strings.HasPrefix(text, "Error: approval failed: the client answered the approval request with JSON-RPC error ") ||
		!strings.Contains(text, "the user interface crashed") || !strings.HasSuffix(text, "; nothing was approved") {
		t.Errorf("an elicitation answered with an error: %q isError=%v", text, isErr)
	}
	mu.Lock()
	answer = func(ctx context.Context) (*mcp.ElicitResult, error) { <-ctx.Done(); return nil, ctx.Err() }
	mu.Unlock()
	start := time.Now()
	text, isErr, _ = c.call(t, "bash", escalate)
	if want := `Error: approval for escalating to "workspace-write" was cancelled`; text != want || !isErr || time.Since(start) > 20*time.Second {
		t.Errorf("an unanswered elicitation: %q isError=%v after %s, want %q", text, isErr, time.Since(start), want)
	}
	if _, err := os.Stat(filepath.Join(ws, "marker")); err == nil {
		t.Error("the command ran")
	}
	waitFor(t, 10*time.Second, "the cancel logged", func() bool {
		return strings.Contains(c.stderr.String(), `msg="approval question unanswered: cancelled" timeout=1s`)
	})
}

// At a reload, an HTTP session that keeps no GET stream open gets no WARN line (the SDK
// reports its tools/list_changed as undelivered: that is logged at debug level, where
// this test waits for it); job_list cuts a 100 KB command to a line. The reload that
// drops the jobs plugin ends its jobs, and dsh holds nothing of them; a SIGTERM then
// leaves nothing.
func TestServeQuietReloadAndShortListing(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // dsh's temp dir: its spill directory is the test's
	profile := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(profile, []byte(withJobs), 0o644)
	srv := startHTTPServe(t, "--workspace", t.TempDir(), "--profile", profile, "--log-level", "debug", "--token-file", writeTokens(t, testToken))
	pid := srv.cmd.Process.Pid
	_, sid := post(t, srv.url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	post(t, srv.url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if body, _ := post(t, srv.url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo warm","description":"Warm up"}}}`); !strings.Contains(body, `warm\n`) {
		t.Fatalf("the warm-up call: %.300s", body)
	}
	fds := unpooledFDs(pid)
	long := "echo " + strings.Repeat("x", 100_000) + "; sleep 60"
	args, _ := json.Marshal(map[string]any{"name": "bash", "arguments": map[string]any{"command": long, "description": "A long command", "run_in_background": true}})
	for i := range 3 {
		if body, _ := post(t, srv.url, sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, 10+i, args)); !strings.Contains(body, "started background job") {
			t.Fatalf("start: %.300s", body)
		}
	}
	jobs := descendants(pid)
	if len(jobs) < 3 {
		t.Fatalf("the three jobs' processes: %v", jobs)
	}
	body, _ := post(t, srv.url, sid, `{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"job_list","arguments":{}}}`)
	if len(body) > 4000 || !strings.Contains(body, `bash-1 [bash] running — echo `+strings.Repeat("x", 195)+`…\n`) {
		t.Errorf("job_list of three 100 KB commands: %d bytes: %.600s", len(body), body)
	}
	os.WriteFile(profile, []byte(withoutJobs), 0o644)
	waitFor(t, 20*time.Second, "the reload", func() bool { return strings.Contains(srv.stderr.String(), "profile reloaded") })
	body, _ = post(t, srv.url, sid, `{"jsonrpc":"2.0","id":21,"method":"tools/list"}`)
	if strings.Contains(body, "job_list") {
		t.Fatalf("the reload did not apply: %.300s", body)
	}
	waitFor(t, 20*time.Second, "the undelivered notification, at debug level", func() bool {
		return strings.Contains(srv.stderr.String(), "undelivered message")
	})
	for _, line := range strings.Split(srv.stderr.String(), "\n") {
		if strings.Contains(line, "level=WARN") {
			t.Errorf("a warning at a reload: %.400s", line)
		}
	}
	// The disposed jobs' processes are gone, and their pipes, pidfds and spill files
	// closed (three jobs' worth is 6 or more descriptors; the allowance is the pipe pool,
	// see TestServeWatchdogDeathIsSupervised).
	wantGone(t, jobs)
	const pool = 4
	if !proctest.Until(5*time.Second, func() bool { return len(unpooledFDs(pid)) <= len(fds)+pool }) {
		t.Errorf("dsh holds %q after its jobs were disposed; %q before they started", unpooledFDs(pid), fds)
	}
	stopHTTP(t, srv)
	if names := entries(t, tmp); len(names) != 0 {
		t.Errorf("left in the temp dir after SIGTERM: %q", names)
	}
}
