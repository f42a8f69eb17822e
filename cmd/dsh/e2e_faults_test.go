package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/internal/sshtest"
)

// fdCount is how many descriptors process pid holds.
func fdCount(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// spillFDs lists, sorted, what process pid's descriptors under root refer to (a
// deleted file or directory reads "<path> (deleted)").
func spillFDs(t *testing.T, pid int, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	var held []string
	for _, e := range entries {
		target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		if strings.HasPrefix(target, root+"/") {
			held = append(held, target)
		}
	}
	slices.Sort(held)
	return held
}

// A temp cleaner deletes dsh's spill directory: the next long output spills again, to
// a new private directory, and a confined command reads it at the path its result
// names; dsh holds nothing of the deleted directory. A symlink put where the new
// directory was is refused: later results say "(unavailable)" and nothing is written
// through it. At the end of its input dsh exits, leaving nothing in the spill root.
func TestServeSpillsAgainAfterTheSpillDirectoryIsDeleted(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the spill root: this test's own
	c := startServe(t, clientOptions{}, "--profile", "sandbox", "--workspace", t.TempDir())
	bash := func(command string) string {
		t.Helper()
		text, _, _ := c.call(t, "bash", map[string]any{"command": command, "description": "Spill and read"})
		return text
	}
	first := spillOf(t, bash("seq 1 30000"))
	dir := filepath.Dir(filepath.Dir(first))
	if filepath.Dir(dir) != tmp {
		t.Fatalf("spill file %s is not under the test's spill root %s", first, tmp)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}

	second := spillOf(t, bash("seq 1 30000"))
	again := filepath.Dir(filepath.Dir(second))
	if again == dir || filepath.Dir(again) != tmp || !strings.HasPrefix(filepath.Base(again), "dsh-spill-") {
		t.Fatalf("after the deletion the spill file is %s (the deleted directory %s)", second, dir)
	}
	if fi, err := os.Stat(again); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the new spill directory: %v %v", fi, err)
	}
	if got := bash("wc -l " + second); got != "30000 "+second+"\n" {
		t.Fatalf("a confined wc -l of the new spill file: %q", got)
	}
	if got := bash("seq 1 30000 | cmp - " + second + " && echo same"); got != "same\n" {
		t.Fatalf("the new spill file's content: %q", got)
	}
	// dsh holds the new directories, and nothing of the deleted ones.
	if got, want := spillFDs(t, c.cmd.Process.Pid, tmp), []string{again, filepath.Dir(second)}; !slices.Equal(got, want) {
		t.Errorf("dsh's descriptors under the spill root: %q, want %q", got, want)
	}

	target := t.TempDir()
	if err := os.RemoveAll(again); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, again); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if got := bash("seq 1 30000"); !strings.HasSuffix(got, "[output truncated; full output: (unavailable)]") {
			t.Errorf("a spill with a symlink in place of the spill directory: %q", got[max(0, len(got)-200):])
		}
	}
	if entries, _ := os.ReadDir(target); len(entries) != 0 {
		t.Errorf("dsh wrote through the symlink: %v", entries)
	}
	log := c.stderr.String()
	if !strings.Contains(log, "the spill directory was deleted; making a new one") || !strings.Contains(log, "the spill directory was moved or replaced") {
		t.Errorf("dsh's warnings:\n%s", log)
	}
	os.Remove(again)
	tree := treeOf(c.cmd.Process.Pid)
	closeAndWait(t, c)
	wantGone(t, tree)
	if names := entries(t, tmp); len(names) != 0 {
		t.Errorf("left in the spill root after dsh exited: %q", names)
	}
}

// A job_output read that lost output says so in its structured content as well as in
// its text: lossy, and the spill file the text names, which holds the whole output;
// the text is the one it always was. dsh holds nothing of the finished job, and leaves
// nothing in its temp dir when it exits.
func TestServeJobOutputTypesALossyRead(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	c := startServe(t, clientOptions{}, "--workspace", t.TempDir())
	pid := c.cmd.Process.Pid
	// Warm up with a spill: the spill directories dsh keeps open are there before it counts.
	if text, _, _ := c.call(t, "bash", map[string]any{"command": "seq 1 30000", "description": "Print a lot"}); !strings.Contains(text, "[output truncated; full output: ") {
		t.Fatalf("the warm-up spill: %q", text[max(0, len(text)-200):])
	}
	spills, fds := spillFDs(t, pid, tmp), unpooledFDs(pid)
	if text, _, _ := c.call(t, "bash", map[string]any{"command": "seq 1 30000", "description": "Print a lot", "run_in_background": true}); text != "started background job bash-1" {
		t.Fatalf("start: %q", text)
	}
	text, isErr, value := c.call(t, "job_output", map[string]any{"job_id": "bash-1", "wait": true, "timeout_ms": 30000})
	const notice, status = "\n[some output was dropped from memory; full output: ", "]\n[status: completed, exit code: 0]"
	i := strings.Index(text, notice)
	if isErr || i < 0 || !strings.HasSuffix(text, status) || !strings.HasSuffix(text[:i], "\n29999\n30000") {
		t.Fatalf("lossy read: %q", text[max(0, len(text)-300):])
	}
	path := strings.TrimSuffix(text[i+len(notice):], status)
	v, _ := value.(map[string]any)
	if v["lossy"] != true || v["stdoutSpill"] != path || v["output"] != strings.TrimSuffix(text, "\n[status: completed, exit code: 0]") || v["status"] != "completed" {
		delete(v, "output")
		t.Errorf("structured content %v; want lossy, stdoutSpill %s", v, path)
	}
	if _, ok := v["stderrSpill"]; ok {
		t.Errorf("a stderrSpill without stderr output: %v", v["stderrSpill"])
	}
	if full, err := os.ReadFile(path); err != nil || !strings.HasPrefix(string(full), "1\n2\n3\n") || !strings.HasSuffix(string(full), "\n30000\n") {
		t.Errorf("the spill file %s: %v", path, err)
	}
	text, _, value = c.call(t, "job_output", map[string]any{"job_id": "bash-1"})
	if v, _ := value.(map[string]any); text != "(no new output)\n[status: completed, exit code: 0]" || v["lossy"] != nil || v["stdoutSpill"] != nil {
		t.Errorf("the next read: %q %v", text, value)
	}
	// The finished job's spill file stays on disk for its reader, not open in dsh: under
	// the spill root it holds its directories, as after the warm-up; and no pipe or pidfd
	// of the job (two or more) is left — the allowance is the pipe pool (see
	// TestServeWatchdogDeathIsSupervised).
	if got := spillFDs(t, pid, tmp); !slices.Equal(got, spills) {
		t.Errorf("dsh's descriptors under the spill root: %q, want %q", got, spills)
	}
	const pool = 4
	if !proctest.Until(5*time.Second, func() bool { return len(unpooledFDs(pid)) <= len(fds)+pool }) {
		t.Errorf("dsh holds %q after the job; %q before it", unpooledFDs(pid), fds)
	}
	tree := treeOf(c.cmd.Process.Pid)
	closeAndWait(t, c)
	wantGone(t, tree)
	if names := entries(t, tmp); len(names) != 0 {
		t.Errorf("left in the temp dir after dsh exited (the job's spill file): %q", names)
	}
}

// A host whose ssh handshake hangs (a real listener that accepts and never speaks): a
// call whose timeout passes while dsh is still connecting is an infrastructure error
// naming the host and saying the command did not start — never a timeout marker, which
// reads as if it ran. Calls wait for the connection being made rather than each
// opening one of their own, and dsh holds no descriptor per call, nor memory; the end
// of its input ends it, leaving nothing.
func TestServeSSHHungHandshakeIsAnInfrastructureError(t *testing.T) {
	m := sshtest.StartMute(t)
	m.Hangup.Store(true) // the row activates, disconnected: the first handshake fails fast
	identity, knownHosts := sshtest.ClientFiles(t)
	ws := t.TempDir()
	profile := filepath.Join(ws, "ssh.yaml")
	if err := os.WriteFile(profile, []byte(fmt.Sprintf(`extends: default
plugins:
  - id: ssh
    name: ssh
    config: {address: %q, user: dev, identityFile: %q, knownHostsFile: %q, spillRoot: %q}
  - id: bash
    name: bash-ssh
    config: {cwd: /}
`, m.Addr, identity, knownHosts, t.TempDir())), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startServe(t, clientOptions{}, "--profile", profile, "--workspace", ws)
	pid := c.cmd.Process.Pid
	m.Hangup.Store(false)
	fds, rss := fdCount(t, pid), rssKB(t, pid)
	want := "Error: ssh: connection to " + m.Addr + " timed out during the handshake; the command did not start"
	for range 3 {
		began := time.Now()
		text, isErr, _ := c.call(t, "bash", map[string]any{"command": "echo never", "description": "Run remotely", "timeoutMs": 1000})
		if text != want || !isErr || strings.Contains(text, "[timed out after") {
			t.Errorf("a call during a hung handshake: %q (isError %v), want %q", text, isErr, want)
		}
		if took := time.Since(began); took < time.Second || took > 5*time.Second {
			t.Errorf("the call took %v, want its timeout (1s)", took)
		}
	}
	if n := m.Accepted(); n > 3 {
		t.Errorf("the server accepted %d connections; want the calls to wait for the one being made", n)
	}
	if now := fdCount(t, pid); now > fds+1 { // the one hung connection
		t.Errorf("dsh holds %d descriptors after the calls, %d before", now, fds)
	}
	// 16 MB: three calls cost far less; a wait for the hung handshake that buffers or
	// allocates as it goes (a retry loop dialling again and again) goes past it.
	if grown := rssKB(t, pid) - rss; grown > 16<<10 {
		t.Errorf("RSS grew by %d kB over the calls (%d kB before)", grown, rss)
	}
	// The end of dsh's input ends it, the hung handshake with it.
	tree := treeOf(pid)
	closeAndWait(t, c)
	wantGone(t, tree)
}

// watchdogsOf lists the crash-cleanup watchdogs of process pid: processes running the
// watchdog whose input is a pipe pid holds the other end of.
func watchdogsOf(t *testing.T, pid int) []int {
	t.Helper()
	return pipeWatchdogs(pid)
}

func pipeWatchdogs(pid int) []int {
	pipes := map[string]bool{}
	entries, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, e := range entries {
		if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name())); strings.HasPrefix(target, "pipe:") {
			pipes[target] = true
		}
	}
	var found []int
	for _, p := range proctest.Processes() {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.Pid))
		if args := strings.Split(string(cmdline), "\x00"); len(args) < 3 || args[1] != "__dsh_subprocess_watchdog" || args[2] != "run" {
			continue
		}
		if in, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/0", p.Pid)); pipes[in] {
			found = append(found, p.Pid)
		}
	}
	return found
}

// The crash-cleanup watchdog is supervised: killed, dsh logs it and starts a new one,
// which it tells every live command — so that a SIGKILL of dsh after the restart still
// ends every command (checked by pid), with or without cgroups; dsh holds no more
// descriptors for it than before, and the new watchdog exits once its work is done.
func TestServeWatchdogDeathIsSupervised(t *testing.T) {
	for _, isolation := range []string{"auto", "process-group"} {
		t.Run(isolation, func(t *testing.T) {
			ws := t.TempDir()
			profile := filepath.Join(ws, "profile.yaml")
			if err := os.WriteFile(profile, []byte("extends: default\nplugins:\n  - id: subprocess\n    config: {isolation: "+isolation+"}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			c := startServe(t, clientOptions{}, "--profile", profile, "--workspace", ws)
			dsh := c.cmd.Process.Pid
			var pids []int
			start := func(n int) {
				for i := range n {
					name := filepath.Join(ws, fmt.Sprintf("pid-%d", len(pids)+i))
					command := "echo $$ > " + name + "; nohup sleep 300 </dev/null >/dev/null 2>&1 & echo $! >> " + name + "; exec sleep 300"
					if text, _, _ := c.call(t, "bash", map[string]any{"command": command, "description": "Run until killed", "run_in_background": true}); !strings.HasPrefix(text, "started background job") {
						t.Fatalf("start: %q", text)
					}
					waitFor(t, 10*time.Second, "two pids in "+name, func() bool { return len(proctest.ReadPids(name)) == 2 })
					pids = append(pids, proctest.ReadPids(name)...)
				}
			}
			start(2)
			var old []int
			waitFor(t, 10*time.Second, "dsh's watchdog", func() bool { old = watchdogsOf(t, dsh); return len(old) == 1 })
			fds := fdCount(t, dsh)
			if err := syscall.Kill(old[0], syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			var now []int
			waitFor(t, 10*time.Second, "a new watchdog to take over", func() bool {
				return strings.Contains(c.stderr.String(), `msg="subprocess: a new crash-cleanup watchdog took over"`)
			})
			// The killed one's pipe closes as it exits, a moment before it is gone.
			proctest.Until(5*time.Second, func() bool { return proctest.Gone(old[0]) })
			if now = watchdogsOf(t, dsh); len(now) != 1 || now[0] == old[0] || !proctest.Gone(old[0]) {
				t.Fatalf("watchdogs after the kill: %v (the killed one %d)", now, old[0])
			}
			log := c.stderr.String()
			for _, want := range []string{
				fmt.Sprintf(`(?m)level=WARN msg="subprocess: the crash-cleanup watchdog died; starting a new one" .*pid=%d$`, old[0]),
				fmt.Sprintf(`(?m)level=INFO msg="subprocess: a new crash-cleanup watchdog took over" .*pid=%d groups=\d+$`, now[0]),
			} {
				if !regexp.MustCompile(want).MatchString(log) {
					t.Errorf("dsh's log lacks %s:\n%s", want, log)
				}
			}
			// The pipe pool (two pipes made ahead of the next command) may fill after fds was
			// counted; a restart's own descriptors are counted exactly, over three restarts,
			// by subprocess's TestWatchdogRestartsKeepNoDescriptor.
			const pool = 4
			if !proctest.Until(5*time.Second, func() bool { return fdCount(t, dsh) <= fds+pool }) {
				t.Errorf("dsh holds %d descriptors after the restart, %d before", fdCount(t, dsh), fds)
			}
			start(1) // a command started after the restart is covered too
			for _, pid := range pids {
				if !alive(pid) {
					t.Fatalf("command %d is not running before the SIGKILL", pid)
				}
			}
			if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 2*time.Second, fmt.Sprintf("the commands %v to be gone within 2s of dsh's SIGKILL", pids), func() bool { return proctest.AllGone(pids...) })
			waitFor(t, 10*time.Second, "the new watchdog to exit", func() bool { return proctest.Gone(now[0]) })
		})
	}
}

// responses collects what dsh answers, by request id: the text of a result's content,
// or the error's message.
type responses struct {
	mu   sync.Mutex
	byID map[int]string
}

// collect adds every line of lines (dsh's stdout) to a new responses.
func collect(lines <-chan string) *responses {
	r := &responses{byID: map[int]string{}}
	go func() {
		for l := range lines {
			r.add(l)
		}
	}()
	return r
}

// add records msg if it is a response; anything else is ignored.
func (r *responses) add(msg string) {
	var m struct {
		ID     *int `json:"id"`
		Result struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
		Error *struct{ Message string } `json:"error"`
	}
	if json.Unmarshal([]byte(msg), &m) != nil || m.ID == nil {
		return
	}
	text := ""
	for _, c := range m.Result.Content {
		text += c.Text
	}
	if m.Error != nil {
		text = "error: " + m.Error.Message
	}
	r.mu.Lock()
	r.byID[*m.ID] = text
	r.mu.Unlock()
}

func (r *responses) get(id int) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	text, ok := r.byID[id]
	return text, ok
}

// await waits for the response to request id.
func (r *responses) await(t *testing.T, id int) string {
	t.Helper()
	var text string
	waitFor(t, 30*time.Second, fmt.Sprintf("the response to request %d", id), func() bool {
		var ok bool
		text, ok = r.get(id)
		return ok
	})
	return text
}

// startRequest is the tools/call of the i-th cancelled background start (request id
// 100+i): its command writes its pid to pid-<i> in the workspace.
func startRequest(i int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo $$ > pid-%d; exec sleep 300","description":"Sleep","run_in_background":true}}}`, 100+i, i)
}

// cancelRequest is the notifications/cancelled of the i-th start.
func cancelRequest(i int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"racing"}}`, 100+i)
}

// checkNoUnknownJob checks what n cancelled background starts (startRequest) left, as
// a client that sends requests with send and finds their answers in got: job_list
// shows exactly the jobs whose start was answered, each one's command runs and every
// other command is gone; with the answered ones killed, the owner starts as many jobs
// as its limit allows (no slot is held by a job nobody knows). It returns the pids of
// every command started.
func checkNoUnknownJob(t *testing.T, ws string, n, limit int, got *responses, send func(string)) []int {
	t.Helper()
	started := regexp.MustCompile(`^started background job (bash-\d+)$`)
	listed := regexp.MustCompile(`(?m)^(bash-\d+) \[bash\] (?:running|stopping) — `) // the jobs holding a slot
	nextID := 2000
	call := func(tool, args string) string {
		nextID++
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, nextID, tool, args))
		return got.await(t, nextID)
	}
	jobList := func() []string {
		var ids []string
		for _, m := range listed.FindAllStringSubmatch(call("job_list", `{}`), -1) {
			ids = append(ids, m[1])
		}
		slices.Sort(ids)
		return ids
	}
	answered := func() map[int]string {
		jobs := map[int]string{}
		for i := range n {
			if text, ok := got.get(100 + i); ok {
				if m := started.FindStringSubmatch(text); m != nil {
					jobs[i] = m[1]
				}
			}
		}
		return jobs
	}
	var why string
	consistent := func() bool {
		jobs := answered()
		want := slices.Sorted(maps.Values(jobs))
		if list := jobList(); !slices.Equal(list, want) {
			why = fmt.Sprintf("job_list shows %v, the answered starts are %v", list, want)
			return false
		}
		for i := range n {
			pids := proctest.ReadPids(filepath.Join(ws, fmt.Sprintf("pid-%d", i)))
			_, known := jobs[i]
			switch {
			case known && (len(pids) != 1 || !alive(pids[0])):
				why = fmt.Sprintf("the answered job %s (call %d) is not running: pids %v", jobs[i], i, pids)
				return false
			case !known && len(pids) == 1 && alive(pids[0]):
				why = fmt.Sprintf("call %d was not answered with a job, and its command %d runs", i, pids[0])
				return false
			}
		}
		return true
	}
	if !proctest.Until(30*time.Second, consistent) {
		t.Fatalf("after the cancellations: %s", why)
	}
	jobs := answered()
	t.Logf("%d of %d cancelled starts were answered with a job (the cancellation came too late)", len(jobs), n)

	for _, id := range jobs {
		call("job_kill", fmt.Sprintf(`{"job_id":%q}`, id))
	}
	waitFor(t, 10*time.Second, "the answered jobs to be killed", func() bool { return len(jobList()) == 0 })
	var pids []int
	for i := range limit {
		name := fmt.Sprintf("more-%d", i)
		args := fmt.Sprintf(`{"command":"echo $$ > %s; exec sleep 300","description":"Sleep","run_in_background":true}`, name)
		if text := call("bash", args); !started.MatchString(text) {
			t.Fatalf("start %d after the race: %q", i, text)
		}
		pids = append(pids, readPidFile(t, filepath.Join(ws, name)))
	}
	for i := range n {
		pids = append(pids, proctest.ReadPids(filepath.Join(ws, fmt.Sprintf("pid-%d", i)))...)
	}
	return pids
}

// Twenty run_in_background calls over stdio, each cancelled (notifications/cancelled)
// as it is sent — racing its start at every stage: before dispatch, while the job
// starts, after it was answered. Whatever the timing, a cancellation never leaves a
// job the client cannot know (checkNoUnknownJob), and nothing is left once dsh exits.
func TestServeCancelledBackgroundStartsLeaveNoUnknownJob(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ws := t.TempDir()
	r := startRaw(t, ws)
	r.initialize(t)
	got := collect(r.lines)
	const n = 20
	for i := range n {
		r.send(t, startRequest(i))
		for k := range i % 4 { // vary how late the cancellation comes
			r.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, 1000+10*i+k))
		}
		r.send(t, cancelRequest(i))
	}
	pids := checkNoUnknownJob(t, ws, n, 10, got, func(msg string) { r.send(t, msg) })
	tree := treeOf(r.cmd.Process.Pid)
	r.in.Close()
	r.waitExit(t)
	waitFor(t, 5*time.Second, "every command to be gone after dsh exits", func() bool { return proctest.AllGone(pids...) })
	wantGone(t, tree)
	if names := entries(t, tmp); len(names) != 0 {
		t.Errorf("left in the temp dir after dsh exited: %q", names)
	}
}

// The same race over HTTP, on the session lane: 24 run_in_background calls, each
// POSTed while its notifications/cancelled is POSTed alongside (after 0-3 pings); each
// call's stream is read to its end. A cancellation never leaves a job the client cannot know,
// ending the session ends every command, and a SIGTERM then leaves nothing.
func TestServeHTTPCancelledBackgroundStartsLeaveNoUnknownJob(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ws := t.TempDir()
	const n, limit = 24, 30
	profile := filepath.Join(ws, "profile.yaml")
	if err := os.WriteFile(profile, []byte(fmt.Sprintf("extends: default\nplugins:\n  - id: jobs\n    config: {maxConcurrentJobsPerOwner: %d}\n", limit)), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startHTTPServe(t, "--profile", profile, "--workspace", ws, "--token-file", writeTokens(t, testToken))
	url := srv.url
	_, sid := post(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+sessionRevision+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if sid == "" {
		t.Fatal("no session id")
	}
	post(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	got := &responses{byID: map[int]string{}}
	var calls sync.WaitGroup
	// send POSTs msg and records what its stream answers (SSE data lines or a JSON body).
	send := func(msg string) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(msg))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err) // send runs on other goroutines too
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		body := string(data)
		for _, line := range strings.Split(body, "\n") {
			got.add(strings.TrimPrefix(line, "data: "))
		}
	}
	for i := range n {
		calls.Add(1)
		go func() { defer calls.Done(); send(startRequest(i)) }()
		for k := range i % 4 { // vary how late the cancellation comes
			send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, 1000+10*i+k))
		}
		send(cancelRequest(i))
	}
	calls.Wait()
	for i := range n {
		if _, ok := got.get(100 + i); !ok {
			t.Errorf("the stream of call %d ended without an answer", i)
		}
	}
	pids := checkNoUnknownJob(t, ws, n, limit, got, send)
	req, _ := http.NewRequest("DELETE", url, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor(t, 20*time.Second, "every command to be gone after the session ends", func() bool { return proctest.AllGone(pids...) })
	stopHTTP(t, srv)
	if names := entries(t, tmp); len(names) != 0 {
		t.Errorf("left in the temp dir after SIGTERM: %q", names)
	}
}
