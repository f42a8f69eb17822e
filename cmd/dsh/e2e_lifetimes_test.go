package main_test

// What a call starts ends with what allowed it, through the real binary: an escalated
// call leaves nothing running once it returns; a session's end (stdio EOF, HTTP DELETE,
// the idle timeout, a stateless principal's expiry) leaves nothing of it within 2 s —
// processes, box, temp dir; a box retired by a swap goes when its last command ends; a
// stopped box is killed and replaced within the call's timeout plus grace.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/internal/sshtest"
)

var marks atomic.Int64

// newMark is a word that marks one test's leftovers in their command lines.
func newMark() string { return fmt.Sprintf("dshleft%d_%d", os.Getpid(), marks.Add(1)) }

// carrying lists the live processes whose command line holds the word mark.
var carrying = proctest.WithArg

// leftovers is a command that leaves processes running, each marked with mark and
// appending to file: under nohup, in a subshell's `( … & )`, a setsid daemon — all three
// ignoring SIGTERM — and returns once each has written.
func leftovers(mark, file string) string {
	loop := func(tag string) string {
		return `bash -c 'trap "" TERM; while :; do echo ` + tag + ` >> ` + file + `; sleep 0.02; done' ` + mark
	}
	return `nohup ` + loop("n") + ` >/dev/null 2>&1 &
( ` + loop("s") + ` </dev/null >/dev/null 2>&1 & )
setsid ` + loop("d") + ` </dev/null >/dev/null 2>&1 &
for w in n s d; do until grep -qx $w ` + file + ` 2>/dev/null; do sleep 0.01; done; done
echo started`
}

// boxesOf are the boxes (per-session sandbox processes) among dsh's descendants.
func boxesOf(dsh int) []int {
	var out []int
	for _, pid := range descendants(dsh) {
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if bytes.Contains(cmd, []byte("\x00__dsh_sandbox_session")) && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// sessionDirs are the sandbox session directories (private temp dir, stage) of the dsh
// processes whose temp dir is tmp.
func sessionDirs(tmp string) []string {
	dirs, _ := filepath.Glob(filepath.Join(tmp, "dsh-sandbox-*", "s*"))
	return dirs
}

// bash is a bash tool call's arguments.
func bash(command string, extra ...any) map[string]any {
	args := map[string]any{"command": command, "description": "Run a lifetime test command"}
	for i := 0; i+1 < len(extra); i += 2 {
		args[extra[i].(string)] = extra[i+1]
	}
	return args
}

var proctestUntil = proctest.Until

// An escalated call — workspace-write or danger-full-access, approved by elicitation —
// leaves nothing running when it returns, and nothing it started writes afterwards,
// while the session is back in read-only.
func TestServeEscalatedCallLeavesNothing(t *testing.T) {
	ws := t.TempDir()
	accept := func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept"}, nil
	}
	c := startServe(t, clientOptions{elicit: accept}, "--profile", "sandbox", "--sandbox-mode", "read-only", "--workspace", ws)
	for _, mode := range []string{"workspace-write", "danger-full-access"} {
		mark, out := newMark(), filepath.Join(ws, "out-"+mode)
		t.Cleanup(func() { killPids(carrying(mark)) })
		text, isErr, _ := c.call(t, "bash", bash(leftovers(mark, out), "sandbox_permissions", mode, "justification", "The test needs it."))
		if text != "started\n" || isErr {
			t.Fatalf("%s: the escalated call: %q", mode, text)
		}
		if left := carrying(mark); len(left) > 0 {
			t.Fatalf("%s: left running after the escalated call returned: %v", mode, left)
		}
		before, _ := os.ReadFile(out)
		if text, _, _ := c.call(t, "bash", bash("echo x >> "+out)); !strings.Contains(text, "[sandbox: file access denied under read-only mode]") {
			t.Fatalf("%s: the next call is not read-only: %q", mode, text)
		}
		if after, _ := os.ReadFile(out); !bytes.Equal(before, after) {
			t.Fatalf("%s: written after the escalated call: %q then %q", mode, before, after)
		}
	}
}

func killPids(pids []int) {
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// endSession is one way a session ends, driven against a dsh it starts.
type endSession struct {
	name  string
	start func(t *testing.T, ws string, args []string) *endingSession
}

// endingSession is a session of a running dsh, which the test then ends.
type endingSession struct {
	pid  int                              // dsh's
	bash func(args map[string]any) string // a bash call's text
	end  func() time.Time                 // ends the session; returns when it ends (or ended)
}

// The session lane's raw JSON-RPC over HTTP, as testToken's principal.
func httpSession(t *testing.T, url string) (call func(map[string]any) string, sid string) {
	_, sid = post(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if sid == "" {
		t.Fatal("no session id")
	}
	id := 1
	return func(args map[string]any) string {
		id++
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": "bash", "arguments": args}})
		body, _ := post(t, url, sid, string(b))
		return body
	}, sid
}

// warmUp runs one session-lane session with a call to its end, so that what dsh
// makes once, on its first call, is there before a test counts its descriptors.
func warmUp(t *testing.T, url string) {
	call, sid := httpSession(t, url)
	if text := call(bash("echo warm")); !strings.Contains(text, "warm") {
		t.Fatalf("the warm-up call: %q", text)
	}
	deleteSession(t, url, sid)
}

// deleteSession ends the session-lane session sid with an HTTP DELETE.
func deleteSession(t *testing.T, url, sid string) {
	req, _ := http.NewRequest("DELETE", url, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

var endings = []endSession{
	{"stdio-eof", func(t *testing.T, ws string, args []string) *endingSession {
		c := startServe(t, clientOptions{}, append([]string{"--workspace", ws}, args...)...)
		return &endingSession{
			pid:  c.cmd.Process.Pid,
			bash: func(a map[string]any) string { text, _, _ := c.call(t, "bash", a); return text },
			end: func() time.Time {
				closed := time.Now() // stdin closes now; Close returns once dsh has exited
				c.ClientSession.Close()
				return closed
			},
		}
	}},
	{"http-delete", func(t *testing.T, ws string, args []string) *endingSession {
		srv := startHTTPServe(t, append([]string{"--workspace", ws, "--token-file", writeTokens(t, testToken)}, args...)...)
		warmUp(t, srv.url)
		call, sid := httpSession(t, srv.url)
		return &endingSession{pid: srv.cmd.Process.Pid, bash: call, end: func() time.Time {
			deleteSession(t, srv.url, sid)
			return time.Now()
		}}
	}},
	{"idle-timeout", func(t *testing.T, ws string, args []string) *endingSession {
		srv := startHTTPServe(t, append([]string{"--workspace", ws, "--session-timeout", "1s", "--token-file", writeTokens(t, testToken)}, args...)...)
		warmUp(t, srv.url)
		call, _ := httpSession(t, srv.url)
		var last time.Time
		return &endingSession{pid: srv.cmd.Process.Pid,
			bash: func(a map[string]any) string { text := call(a); last = time.Now(); return text },
			end:  func() time.Time { return last.Add(time.Second) }}
	}},
	{"principal-expiry", func(t *testing.T, ws string, args []string) *endingSession {
		srv := startHTTPServe(t, append([]string{"--workspace", ws, "--session-timeout", "1s", "--token-file", writeTokens(t, testToken)}, args...)...)
		warmUp(t, srv.url)
		c := httpStateless(t, srv.url, testToken, statelessOptions{noListen: true})
		var last time.Time
		return &endingSession{pid: srv.cmd.Process.Pid,
			bash: func(a map[string]any) string { text := c.text(t, "bash", a); last = time.Now(); return text },
			end:  func() time.Time { return last.Add(time.Second) }}
	}},
}

// When a session ends — its stdin closed, an HTTP DELETE, the idle timeout of a
// session-lane session or of a stateless principal — nothing of it is left within 2 s:
// what its finished calls left running (nohup, subshells, setsid daemons, SIGTERM
// ignored), its background jobs, under bash-sandbox its box and its private temp dir,
// and (where dsh serves on) the descriptors it held for them.
func TestSessionEndLeavesNothing(t *testing.T) {
	for _, ex := range []struct {
		name string
		args []string
	}{{"bash-local", nil}, {"bash-sandbox", []string{"--profile", "sandbox"}}} {
		for _, e := range endings {
			t.Run(ex.name+"/"+e.name, func(t *testing.T) {
				ws := t.TempDir()
				tmp := t.TempDir()
				t.Setenv("TMPDIR", tmp) // dsh's temp dir: its session directories are the test's
				mark := newMark()
				t.Cleanup(func() { killPids(carrying(mark)) })
				s := e.start(t, ws, ex.args)
				held := heldFDs(s.pid) // dsh serves on when the session ends over HTTP (warmed up)
				if text := s.bash(bash(leftovers(mark, filepath.Join(ws, "out")))); !strings.Contains(text, "started") {
					t.Fatalf("the call: %q", text)
				}
				if text := s.bash(bash("trap '' TERM; exec -a "+mark+" sleep 300", "run_in_background", true)); !strings.Contains(text, "started background job") {
					t.Fatalf("the job: %q", text)
				}
				waitFor(t, 20*time.Second, "the job to run", func() bool { return len(carrying(mark)) == 4 })
				var boxes []int
				if ex.name == "bash-sandbox" {
					if boxes = boxesOf(s.pid); len(boxes) != 1 || len(sessionDirs(tmp)) != 1 {
						t.Fatalf("boxes %v, session dirs %q", boxes, sessionDirs(tmp))
					}
				}
				ended := s.end()
				nothingLeft := func() bool {
					for _, b := range boxes {
						if alive(b) {
							return false
						}
					}
					return len(carrying(mark)) == 0 && len(sessionDirs(tmp)) == 0 && (!alive(s.pid) || len(heldFDs(s.pid)) <= len(held))
				}
				if !proctestUntil(time.Until(ended.Add(2*time.Second)), nothingLeft) {
					t.Fatalf("2s after the session's end: processes %v, boxes %v, session dirs %q, descriptors %q (before the session's calls %q)",
						carrying(mark), slices.DeleteFunc(boxes, func(b int) bool { return !alive(b) }), sessionDirs(tmp), heldFDs(s.pid), held)
				}
				took := time.Since(ended)
				if took > 2*time.Second { // a stdio session's end returns once dsh has exited
					t.Fatalf("nothing left only %v after the session's end", took)
				}
				t.Logf("nothing left %v after the session's end", took.Round(time.Millisecond))
			})
		}
	}
}

// A box retired by a swap (bash-sandbox → bash-local) while its session's job runs
// closes when the job ends; the session's private temp dir goes when the session does.
func TestServeSwapClosesTheRetiredBox(t *testing.T) {
	ws, tmp := t.TempDir(), t.TempDir()
	t.Setenv("TMPDIR", tmp)
	profile := filepath.Join(t.TempDir(), "profile.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(profile+".tmp", []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(profile+".tmp", profile); err != nil {
			t.Fatal(err)
		}
	}
	write("extends: sandbox\n")
	c := startServe(t, clientOptions{}, "--workspace", ws, "--profile", profile)
	dsh := c.cmd.Process.Pid
	awaitProbe(t, c) // its box is not the session's
	// The box started ahead for the first session (the one the job runs in), started
	// with the session, long before the probe ended, is up: dsh holds its control
	// socket and its pidfd.
	waitFor(t, 20*time.Second, "the box started ahead", func() bool { return len(boxesOf(dsh)) == 1 })
	held := boxFDs(dsh) - 2
	release := filepath.Join(ws, "release")
	if text, _, _ := c.call(t, "bash", bash("until [ -e "+release+" ]; do sleep 0.02; done; echo done", "run_in_background", true)); text != "started background job bash-1" {
		t.Fatalf("start: %q", text)
	}
	waitFor(t, 20*time.Second, "the job's box", func() bool { return len(boxesOf(dsh)) == 1 })
	boxes := boxesOf(dsh)
	if len(sessionDirs(tmp)) != 1 {
		t.Fatalf("session dirs %q", sessionDirs(tmp))
	}
	write("extends: default\n")
	waitFor(t, 20*time.Second, "the swap to bash-local", func() bool {
		text, _, _ := c.call(t, "bash", bash("echo $TMPDIR"))
		return text == tmp+"\n"
	})
	if !alive(boxes[0]) {
		t.Fatal("the box was closed under its running job")
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if text, _, _ := c.call(t, "job_output", map[string]any{"job_id": "bash-1", "wait": true, "timeout_ms": 20000}); text != "done\n[status: completed, exit code: 0]" {
		t.Fatalf("the job: %q", text)
	}
	ended := time.Now()
	closed := proctest.Until(2*time.Second, func() bool { return !alive(boxes[0]) && boxFDs(dsh) == held })
	if !closed {
		var tree []string
		for _, pid := range descendants(dsh) {
			cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			tree = append(tree, strconv.Itoa(pid)+":"+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
		t.Fatalf("the retired box did not close within 2s of its last command: alive %v, dsh's sockets and pidfds %d, want %d (%s); boxes then %v, now %v; dsh's processes %q",
			alive(boxes[0]), boxFDs(dsh), held, fdTargets(dsh), boxes, boxesOf(dsh), tree)
	}
	t.Logf("the retired box closed %v after its job ended", time.Since(ended).Round(time.Millisecond))
	if len(sessionDirs(tmp)) != 1 {
		t.Fatalf("the live session's temp dir: %q", sessionDirs(tmp))
	}
	c.ClientSession.Close()
	waitFor(t, 2*time.Second, "the ended session's temp dir to go", func() bool { return len(sessionDirs(tmp)) == 0 })
}

// heldFDs are the targets of dsh's open descriptors other than its TCP sockets (the
// test client's connections come and go with HTTP keep-alive): files, pipes, unix
// sockets, pidfds, cgroup and inotify descriptors.
func heldFDs(dsh int) []string {
	tcp := map[string]bool{}
	for _, table := range []string{"tcp", "tcp6"} {
		data, _ := os.ReadFile("/proc/" + strconv.Itoa(dsh) + "/net/" + table)
		for _, line := range strings.Split(string(data), "\n")[1:] {
			if f := strings.Fields(line); len(f) > 9 {
				tcp["socket:["+f[9]+"]"] = true
			}
		}
	}
	dir := "/proc/" + strconv.Itoa(dsh) + "/fd"
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err == nil && !tcp[target] {
			out = append(out, target)
		}
	}
	return out
}

// unpooledFDs are heldFDs(dsh) but its cgroup files: dsh keeps emptied command cgroups
// for reuse (up to 8 of each kind) with their files open, so how many it holds follows
// how many commands once ran at the same time, not a leak. What is left (pipes, pidfds,
// spill files, sockets other than TCP) is per command, stream or session.
func unpooledFDs(dsh int) []string {
	return slices.DeleteFunc(heldFDs(dsh), func(fd string) bool { return strings.HasPrefix(fd, "/sys/fs/cgroup/") })
}

// fdTargets lists what dsh's socket and pidfd descriptors are.
func fdTargets(dsh int) string {
	dir := "/proc/" + strconv.Itoa(dsh) + "/fd"
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		target, _ := os.Readlink(filepath.Join(dir, e.Name()))
		if strings.HasPrefix(target, "socket:") || target == "anon_inode:[pidfd]" {
			out = append(out, e.Name()+"→"+target)
		}
	}
	return strings.Join(out, " ")
}

// boxFDs counts dsh's descriptors that a box holds open there: sockets (its control
// connection) and pidfds.
func boxFDs(dsh int) int {
	dir := "/proc/" + strconv.Itoa(dsh) + "/fd"
	entries, _ := os.ReadDir(dir)
	n := 0
	for _, e := range entries {
		target, _ := os.Readlink(filepath.Join(dir, e.Name()))
		if strings.HasPrefix(target, "socket:") || target == "anon_inode:[pidfd]" {
			n++
		}
	}
	return n
}

// A stopped box (SIGSTOP) does not hold a call past its timeout: a 2 s call answers
// within its timeout plus the grace period with an error naming the box, which is
// killed; the next call runs in a new box. dsh holds nothing of the killed box, and at
// the end of its input exits leaving no process and nothing in its temp dir.
func TestServeStoppedBoxIsReplaced(t *testing.T) {
	ws, tmp := t.TempDir(), t.TempDir()
	t.Setenv("TMPDIR", tmp) // dsh's temp dir: its sandbox and spill directories are the test's
	c := startServe(t, clientOptions{}, "--profile", "sandbox", "--workspace", ws)
	dsh := c.cmd.Process.Pid
	if text, _, _ := c.call(t, "bash", bash("echo first")); text != "first\n" {
		t.Fatalf("first: %q", text)
	}
	boxes := boxesOf(dsh)
	if len(boxes) != 1 {
		t.Fatalf("boxes: %v", boxes)
	}
	// With one box and no command running: its control connection, nothing else. (dsh's
	// whole count is no measure here: the emptied command cgroups it keeps for reuse, with
	// their files open, grow in number as the calls go on.)
	held := boxFDs(dsh)
	box := boxes[0]
	if err := syscall.Kill(box, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(box, syscall.SIGCONT) })
	start := time.Now()
	text, isErr, _ := c.call(t, "bash", bash("echo hi", "timeoutMs", 2000))
	took := time.Since(start)
	want := regexp.MustCompile(`^Error: bash-sandbox: spawn failed: sandbox: bash-sandbox: the session sandbox \(pid ` + strconv.Itoa(box) +
		`\) stopped answering \(no answer in \d+ms\); it was killed with its commands, and the session's next call starts a new one$`)
	if !isErr || !want.MatchString(text) {
		t.Fatalf("the call to the stopped box: %q (isError %v)", text, isErr)
	}
	// graceMs is 3000 by default.
	if took < 5*time.Second || took > 9*time.Second { // far below the unbounded wait it replaces
		t.Errorf("answered after %v, want its timeout plus grace (5s)", took)
	}
	waitFor(t, 10*time.Second, "the stopped box to be killed", func() bool { return !alive(box) })
	if text, _, _ := c.call(t, "bash", bash("echo again")); text != "again\n" {
		t.Fatalf("the next call: %q", text)
	}
	if now := boxesOf(dsh); len(now) != 1 || now[0] == box {
		t.Fatalf("boxes after: %v", now)
	}
	// The killed box's control connection and pidfd are closed: one box's worth again (a
	// leak of the killed box's descriptors is 1 or 2 more).
	if !proctest.Until(5*time.Second, func() bool { return boxFDs(dsh) <= held }) {
		t.Errorf("dsh holds %d descriptors of boxes after the box was replaced, %d before: %q", boxFDs(dsh), held, heldFDs(dsh))
	}
	tree := treeOf(dsh)
	closeAndWait(t, c)
	wantGone(t, tree)
	if names := entries(t, tmp); len(names) != 0 {
		t.Errorf("left in the temp dir: %q", names)
	}
}

// Under bash-ssh too, a session's end leaves nothing of it on the remote host within
// 2 s: what its finished calls left in their process groups (nohup, subshells,
// SIGTERM ignored), what left them (setsid daemons, reached by the session's tag in
// their environment), and its background jobs — while another session's leftovers
// on the same host live on; dsh's descriptors are back to what they were.
func TestSSHSessionEndLeavesNothing(t *testing.T) {
	srv := sshtest.Start(t)
	for _, e := range endings {
		t.Run(e.name, func(t *testing.T) {
			ws := t.TempDir()
			profile := writeSSHProfile(t, srv, filepath.Join(t.TempDir(), "ssh.yaml"), srv.KnownHostsFile, ws)
			mark, other := newMark(), newMark()
			t.Cleanup(func() { killPids(append(carrying(mark), carrying(other)...)) })
			s := e.start(t, ws, []string{"--profile", profile})
			held := heldFDs(s.pid)
			if text := s.bash(bash(leftovers(mark, filepath.Join(ws, "out")))); !strings.Contains(text, "started") {
				t.Fatalf("the call: %q", text)
			}
			if text := s.bash(bash("trap '' TERM; exec -a "+mark+" sleep 300", "run_in_background", true)); !strings.Contains(text, "started background job") {
				t.Fatalf("the job: %q", text)
			}
			// Not the session's: started on the host by another of its users' shells.
			bystander := exec.Command("setsid", "bash", "-c", "exec -a "+other+" sleep 300")
			if err := bystander.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = bystander.Process.Kill(); _ = bystander.Wait() })
			waitFor(t, 20*time.Second, "the job to run", func() bool { return len(carrying(mark)) == 4 })
			ended := s.end()
			if !proctestUntil(time.Until(ended.Add(2*time.Second)), func() bool {
				return len(carrying(mark)) == 0 && (!alive(s.pid) || len(heldFDs(s.pid)) <= len(held))
			}) {
				t.Fatalf("2s after the session's end: processes %v, descriptors %q (before the session's calls %q)", carrying(mark), heldFDs(s.pid), held)
			}
			took := time.Since(ended)
			if took > 2*time.Second {
				t.Fatalf("nothing left only %v after the session's end", took)
			}
			t.Logf("nothing left %v after the session's end", took.Round(time.Millisecond))
			if len(carrying(other)) != 1 {
				t.Fatalf("a process that is not the session's was killed")
			}
		})
	}
}
