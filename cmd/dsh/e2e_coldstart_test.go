package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
)

// The crash-cleanup watchdog starts in the background, after dsh's first answer, yet it
// covers the first command: a client that sends its first call together with
// initialize, and a SIGKILL of dsh as soon as that command runs, leave nothing running —
// with cgroups and with process groups only (there, once dsh has the command in hand).
func TestServeSIGKILLRightAfterTheFirstCommandEndsIt(t *testing.T) {
	for _, isolation := range []string{"cgroup", "process-group"} {
		t.Run(isolation, func(t *testing.T) {
			dir := t.TempDir()
			profile := filepath.Join(dir, "p.yaml")
			config := ""
			if isolation == "process-group" {
				config = "\n    config:\n      isolation: process-group"
			}
			body := fmt.Sprintf("plugins:\n  - {id: tools, name: tools}\n  - {id: prompt, name: prompt}\n"+
				"  - id: subprocess\n    name: subprocess%s\n  - {id: shell-env, name: shell-env}\n"+
				"  - {id: bash, name: bash-local}\n  - id: tool-bash\n    name: tool-bash\n    config: {enableRunInBackground: false}\n", config)
			if err := os.WriteFile(profile, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			pidFile := filepath.Join(dir, "pid")
			s := startRawStdio(t, nil, "--profile", profile, "--workspace", dir)
			// No waiting for any answer: the call reaches dsh with initialize.
			s.send(t, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
			s.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			command := "echo $$ > " + pidFile + "; exec sleep 600"
			if isolation == "process-group" {
				// Without a cgroup the watchdog learns the group right after the fork, before
				// dsh reads the command's output: the pid file is written once dsh has read
				// more than a pipe holds (a SIGKILL between the fork and that is the one
				// window process groups leave; a cgroup has none).
				command = "head -c 300000 /dev/zero; " + command
			}
			s.call(t, 1, command)
			pid := readPidFile(t, pidFile)
			if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			s.cmd.Wait()
			proctest.WaitFor(t, 10*time.Second, "the first command to end after dsh's SIGKILL", func() bool {
				return proctest.Gone(pid)
			})
		})
	}
}

// With the sandbox profile, dsh answers initialize without waiting for the sandbox's
// probe; a call sent together with initialize has its own box give the verdict (or
// waits for the probe) and runs confined (a write outside the workspace fails), and
// status then shows the backend.
func TestServeFirstConfinedCallWaitsForTheBackgroundProbe(t *testing.T) {
	ws := t.TempDir()
	outside := filepath.Join(t.TempDir(), "written")
	s := startRawStdio(t, nil, "--profile", "sandbox", "--workspace", ws)
	s.send(t, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	s.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.call(t, 1, "echo in > written && echo out > "+outside+"; echo done")
	got := s.awaitIDs(t, 1)
	s.send(t, `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"dsh://status"}}`)
	got[2] = s.awaitIDs(t, 2)[2]
	if !strings.Contains(got[1], `"text":"done\n[stderr]\nbash: line 1: `+outside) || !strings.Contains(got[1], `"mode":"workspace-write"`) {
		t.Errorf("the first confined call: %s", got[1])
	}
	if _, err := os.Stat(outside); err == nil {
		t.Fatal("the first call wrote outside the workspace")
	}
	if data, err := os.ReadFile(filepath.Join(ws, "written")); err != nil || string(data) != "in\n" {
		t.Errorf("the workspace write: %q %v", data, err)
	}
	if !strings.Contains(got[2], `sandbox: user namespaces + Landlock ABI`) || strings.Contains(got[2], "probing") {
		t.Errorf("status after the first confined call: %s", got[2])
	}
	s.in.Close()
	s.cmd.Wait()
}

// A sandbox server starts one box ahead once its first client is answered, before any
// call; the first confined call runs in it (its PID namespace). One no call took ends
// with dsh: nothing is left either way.
func TestServeFirstSessionTakesTheBoxAhead(t *testing.T) {
	for _, call := range []bool{true, false} {
		t.Run(fmt.Sprintf("call=%v", call), func(t *testing.T) {
			ws := t.TempDir()
			s := startRawStdio(t, nil, "--profile", "sandbox", "--workspace", ws)
			dsh := s.cmd.Process.Pid
			s.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
			s.awaitIDs(t, 1)
			var ahead []int
			waitFor(t, 20*time.Second, "the box started ahead", func() bool { ahead = boxesOf(dsh); return len(ahead) == 1 })
			ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", ahead[0]))
			if err != nil {
				t.Fatal(err)
			}
			if call {
				s.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
				s.call(t, 2, "readlink /proc/self/ns/pid")
				if got := s.awaitIDs(t, 2)[2]; !strings.Contains(got, `"text":"`+ns+`\n`) {
					t.Errorf("the first call did not run in the box started ahead (%s): %s", ns, got)
				}
			}
			tree := append(descendants(dsh), dsh)
			s.in.Close()
			s.cmd.Wait()
			proctest.WaitFor(t, 10*time.Second, "dsh's processes to be gone", func() bool {
				for _, pid := range tree {
					if !proctest.Gone(pid) {
						return false
					}
				}
				return true
			})
		})
	}
}

// awaitProbe waits until no row of c's status says the sandbox is still probing its
// backend (dsh serve probes in the background, in a box of its own): what dsh holds is
// then what its composition holds.
func awaitProbe(t *testing.T, c *client) {
	t.Helper()
	waitFor(t, 30*time.Second, "the sandbox probe", func() bool {
		for _, row := range readStatus(t, c.ClientSession).Rows {
			if strings.HasPrefix(row.Detail, "sandbox: probing") {
				return false
			}
		}
		return true
	})
}
