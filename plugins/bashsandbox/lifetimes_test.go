package bashsandbox_test

// What a call starts ends with what allowed it (docs/sandbox.md, "Lifetimes"): an
// escalated call leaves nothing running once it returns, a session's end leaves nothing
// of it (processes, box, temp dir) within 2 s, a box retired by a swap goes when its
// last command does, and a box that stops answering is killed and replaced within the
// call's timeout plus its grace period — on both backends.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
	"github.com/dsh-dev/dsh/plugins/subprocess"
)

// marks makes each test's leftovers recognisable by a word of their command line.
var marks atomic.Int64

func newMark() string {
	return fmt.Sprintf("dshleft%d_%d", os.Getpid(), marks.Add(1))
}

// carrying lists the live processes whose command line holds the word mark.
var carrying = proctest.WithArg

// gone reports whether pid does not run (absent, or a zombie).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

// usesCgroups reports whether the stack's Supervisor gives each command a cgroup.
func usesCgroups(t *testing.T, st *stack) bool {
	sup, _ := container.Lookup(st.rt, subprocess.Service)
	return strings.HasPrefix(sup.Isolation(), "cgroup v2")
}

// leftovers is a command that starts processes meant to outlive it, each marked with
// mark — under nohup, in a subshell's `( … & )`, one ignoring SIGTERM and, with
// daemon, a setsid daemon — each appending to file while it runs, and returns once
// each has written.
func leftovers(mark, file string, daemon bool) string {
	loop := func(tag string) string {
		return `bash -c 'trap "" TERM; while :; do echo ` + tag + ` >> ` + file + `; sleep 0.02; done' ` + mark
	}
	cmd := `nohup ` + loop("n") + ` >/dev/null 2>&1 &
( ` + loop("s") + ` </dev/null >/dev/null 2>&1 & )
`
	want := "n s"
	if daemon {
		cmd += `setsid ` + loop("d") + ` </dev/null >/dev/null 2>&1 &
`
		want += " d"
	}
	return cmd + `for w in ` + want + `; do until grep -qx $w ` + file + ` 2>/dev/null; do sleep 0.01; done; done
echo started`
}

// A call approved once — for workspace-write, or danger-full-access — leaves nothing
// running when it returns: what it started under nohup, in a subshell, ignoring
// SIGTERM, or as a setsid daemon (always in the namespaces, where an escalated call has
// a box of its own; elsewhere as far as its cgroup reaches) is gone, and nothing writes
// after it while the session is back in read-only.
func TestConfinedEscalationLeavesNothing(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			cfg := map[string]any{"defaultMode": "read-only"}
			for k, v := range be.config {
				cfg[k] = v
			}
			st := newStack(t, stackSetup{approval: "allow", bashConfig: cfg})
			for _, mode := range []string{"workspace-write", "danger-full-access"} {
				t.Run(mode, func(t *testing.T) {
					ws := workspace(t)
					s := session("escalated-"+mode, ws)
					mark, out := newMark(), filepath.Join(ws, "out")
					t.Cleanup(func() { killAll(carrying(mark)) })
					daemon := usesCgroups(t, st) || (mode == "workspace-write" && be.config == nil)
					res := st.bash(t, s, leftovers(mark, out, daemon), escalate(mode)...)
					if res.Text != "started\n" || res.IsError {
						t.Fatalf("the escalated call: %q", res.Text)
					}
					if left := carrying(mark); len(left) > 0 {
						t.Fatalf("left running after the escalated call returned: %v", left)
					}
					before, _ := os.ReadFile(out)
					expect(t, st.bash(t, s, "wc -l < "+out+" >/dev/null"), "(no output)", false)
					if after, _ := os.ReadFile(out); !bytes.Equal(before, after) {
						t.Fatalf("something wrote after the escalated call: %q then %q", before, after)
					}
				})
			}
		})
	}
}

// killAll SIGKILLs pids (the cleanup of a failed test).
func killAll(pids []int) {
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// sessionTempDir is where a session's private temp dir lives, seen from the host: the
// directory holding the tmp/ where a command's file name appeared — the session's
// directory when /tmp is a directory of the host's, else the root of the box's mount
// namespace (/proc/<box>/root: its /tmp is a tmpfs of its own, gone with the box).
func sessionTempDir(t *testing.T, name string) string {
	t.Helper()
	matches := tempFiles(name)
	if len(matches) != 1 {
		t.Fatalf("the session's private temp file on the host: %q", matches)
	}
	return filepath.Dir(filepath.Dir(matches[0]))
}

// tempFiles are the files called name in the private temp dirs of this process's
// sessions: on the host, or in a box's own /tmp (seen through each of its processes:
// one path per file).
func tempFiles(name string) []string {
	matches, _ := filepath.Glob(filepath.Join(hostSessionDirs(), "tmp", name))
	inBoxes, _ := filepath.Glob("/proc/[0-9]*/root/tmp/" + name)
	var seen []os.FileInfo
	for _, p := range inBoxes {
		fi, err := os.Stat(p)
		if err != nil || slices.ContainsFunc(seen, func(o os.FileInfo) bool { return os.SameFile(o, fi) }) {
			continue
		}
		seen = append(seen, fi)
		matches = append(matches, p)
	}
	return matches
}

// hostSessionDirs is the pattern of this process's sessions' directories on the host
// (private temp dir or stage).
func hostSessionDirs() string {
	return filepath.Join(os.TempDir(), "dsh-sandbox-"+strconv.Itoa(os.Getpid())+"-*", "s*")
}

// newDirs are the directories matching pattern that are not in before.
func newDirs(pattern string, before []string) []string {
	now, _ := filepath.Glob(pattern)
	return slices.DeleteFunc(now, func(d string) bool { return slices.Contains(before, d) })
}

// When a session ends, nothing of it is left within 2 s: the processes its finished
// calls left running (nohup, subshells, SIGTERM ignored, setsid daemons), its
// background jobs, its box and its private temp dir — whatever graceMs says.
func TestConfinedSessionEndLeavesNothing(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			cfg := map[string]any{"defaultMode": "workspace-write", "graceMs": 60000}
			for k, v := range be.config {
				cfg[k] = v
			}
			st := newStack(t, stackSetup{bashConfig: cfg})
			ws := workspace(t)
			s := session("ending", ws)
			mark, out := newMark(), filepath.Join(ws, "out")
			t.Cleanup(func() { killAll(carrying(mark)) })
			daemon := usesCgroups(t, st) || be.config == nil
			before, _ := filepath.Glob(hostSessionDirs())
			expect(t, st.bash(t, s, leftovers(mark, out, daemon)+`; echo > "$TMPDIR/`+mark+`"`), "started\n", false)
			res := st.bash(t, s, "trap '' TERM; exec -a "+mark+" sleep 300", "run_in_background", true)
			if !strings.HasPrefix(res.Text, "started background job ") {
				t.Fatalf("the job: %q", res.Text)
			}
			dir := sessionTempDir(t, mark)
			box := onlyBox(t, st)
			waitFor(t, "the job to run", func() bool { return len(carrying(mark)) == 3+btoi(daemon) })

			start := time.Now()
			st.rt.EndSession(s.ID)
			took := time.Since(start)
			if left := carrying(mark); len(left) > 0 {
				t.Errorf("processes of the ended session: %v", left)
			}
			if !gone(box) {
				t.Errorf("its box (pid %d) runs on", box)
			}
			if left := tempFiles(mark); len(left) > 0 {
				t.Errorf("its private temp dir (in %s): %q", dir, left)
			}
			if left := newDirs(hostSessionDirs(), before); len(left) > 0 {
				t.Errorf("its directories on the host: %q", left)
			}
			if took > 2*time.Second {
				t.Errorf("the session's end took %v", took)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A box that stops answering (SIGSTOP) is killed and replaced: a call waiting for it to
// start a command fails within its timeout plus grace with an error naming it; a call
// whose command it started, and then does not report, ends as promptly, saying so; the
// session's next call runs in a new box.
func TestConfinedStoppedBoxIsReplaced(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			cfg := map[string]any{"defaultMode": "workspace-write"}
			for k, v := range be.config {
				cfg[k] = v
			}
			st := newStack(t, stackSetup{bashConfig: cfg}) // graceMs 500
			ws := workspace(t)
			s := session("stopped", ws)
			expect(t, st.bash(t, s, "echo first"), "first\n", false)
			box := onlyBox(t, st)
			stop(t, box)
			start := time.Now()
			res := st.bash(t, s, "echo hi", "timeoutMs", 2000)
			took := time.Since(start)
			wedged := regexp.MustCompile(`^Error: bash-sandbox: spawn failed: sandbox: bash-sandbox: the session sandbox \(pid ` + strconv.Itoa(box) +
				`\) stopped answering \(no answer in \d+ms\); it was killed with its commands, and the session's next call starts a new one$`)
			if !res.IsError || !wedged.MatchString(res.Text) {
				t.Fatalf("the call to a stopped box: %q", res.Text)
			}
			if took < 2500*time.Millisecond || took > 4*time.Second {
				t.Errorf("it answered after %v, want its timeout plus grace (2.5s)", took)
			}
			waitFor(t, "the stopped box to be killed", func() bool { return gone(box) })
			expect(t, st.bash(t, s, "echo again"), "again\n", false)
			second := onlyBox(t, st)
			if second == box {
				t.Fatal("no new box")
			}

			// The box stops while its command runs: the command is killed at its timeout
			// (from the host), and the box, which cannot report it, is replaced.
			started := filepath.Join(ws, "started")
			done := make(chan string, 1)
			go func() {
				done <- st.bash(t, s, "touch "+started+"; exec sleep 300", "timeoutMs", 2000).Text
			}()
			waitFor(t, "the command to start", func() bool { return exists(started) })
			stop(t, second)
			select {
			case text := <-done:
				note := "[subprocess: bash-sandbox: the session sandbox (pid " + strconv.Itoa(second) + ") stopped answering (no answer in 500ms); it was killed with its commands, and the session's next call starts a new one]"
				if !strings.HasPrefix(text, "[stderr]\n"+note+"\n[timed out after 2000ms]\n") {
					t.Fatalf("the call whose box stopped: %q", text)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the call whose box stopped did not answer")
			}
			waitFor(t, "the second stopped box to be killed", func() bool { return gone(second) })
			expect(t, st.bash(t, s, "echo third"), "third\n", false)
		})
	}
}

// stop SIGSTOPs pid, and SIGCONTs it when the test ends (a stopped process would keep
// the stack's cleanup waiting).
func stop(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	waitFor(t, "the box to stop", func() bool {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		i := bytes.LastIndexByte(b, ')')
		return i > 0 && i+2 < len(b) && b[i+2] == 'T'
	})
}

// A box retired by a swap (bash-sandbox → bash-local) while its session's command runs
// closes when that command ends — its process and descriptors go — and the session's
// directory (its private temp dir, or the stage of a box's own /tmp) goes when the
// session ends, though bash-sandbox is no longer there.
func TestConfinedSwappedOutBoxCloses(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			cfg := map[string]any{"defaultMode": "workspace-write"}
			for k, v := range be.config {
				cfg[k] = v
			}
			setup := stackSetup{bashConfig: cfg}
			st := newStack(t, setup)
			ws := workspace(t)
			s := session("swapped", ws)
			mark := newMark()
			release := filepath.Join(ws, "release")
			before, _ := filepath.Glob(hostSessionDirs())
			res := st.bash(t, s, `echo > "$TMPDIR/`+mark+`"; until [ -e `+release+` ]; do sleep 0.02; done; echo done`, "run_in_background", true)
			id := strings.TrimPrefix(res.Text, "started background job ")
			waitFor(t, "the job to start", func() bool { return len(tempFiles(mark)) == 1 })
			dirs := newDirs(hostSessionDirs(), before)
			if len(dirs) != 1 {
				t.Fatalf("the session's directory on the host: %q", dirs)
			}
			dir := dirs[0] // the session's, which outlives its boxes
			box := onlyBox(t, st)

			local := stackSetup{executor: "bash-local"}
			if err := st.rt.Compose("sandbox-test", stackRows(local, st.root, st.home)); err != nil {
				t.Fatal(err)
			}
			expect(t, st.bash(t, s, "echo local"), "local\n", false)
			if gone(box) {
				t.Fatal("the box was closed under its running job")
			}
			if err := os.WriteFile(release, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if out := st.call(t, s, "job_output", `{"job_id":"`+id+`","wait":true,"timeout_ms":10000}`).Text; out != "done\n[status: completed, exit code: 0]" {
				t.Fatalf("the job: %q", out)
			}
			waitFor(t, "the retired box to close after its last command", func() bool { return gone(box) })
			if _, err := os.Stat(dir); err != nil {
				t.Fatalf("the live session's temp dir: %v", err)
			}
			st.rt.EndSession(s.ID)
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the ended session's temp dir %s: %v", dir, err)
			}
			sup, _ := container.Lookup(st.rt, subprocess.Service)
			if n := bashsandbox.Sessions(sup); n != 0 {
				t.Errorf("%d sandbox sessions after the session ended", n)
			}
		})
	}
}
