package subprocess

import (
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseStat(t *testing.T) {
	for _, c := range []struct {
		in         string
		ppid, pgrp int
		state      byte
		ok         bool
	}{
		{"42 (bash) S 1 42 42 0 -1 4194560 …", 1, 42, 'S', true},
		{"7 (a) b) (c ) Z 3 9 9 0", 3, 9, 'Z', true},
		{"7 (x)  R  3  9 9", 3, 9, 'R', true},
		{"7 (x) R 3", 0, 0, 0, false},
		{"7 (x) RR 3 9", 0, 0, 0, false},
		{"7 (x) S -1 9", 0, 0, 0, false},
		{"garbage", 0, 0, 0, false},
		{"", 0, 0, 0, false},
	} {
		ppid, pgrp, state, ok := parseStat([]byte(c.in))
		if ppid != c.ppid || pgrp != c.pgrp || state != c.state || ok != c.ok {
			t.Errorf("parseStat(%q) = %d %d %q %v", c.in, ppid, pgrp, state, ok)
		}
	}
}

// liveGroups sees a live group, not a group whose only member is a zombie, and not a
// group that is gone.
func TestLiveGroups(t *testing.T) {
	if !liveGroups()[syscall.Getpgrp()] {
		t.Fatal("this process's own group is missing")
	}
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !liveGroups()[pid] || !groupAlive(pid) {
		t.Errorf("group %d of a running sleep missing", pid)
	}
	cmd.Process.Kill()
	// A zombie: exited, not yet reaped.
	var info siginfo
	if e := waitid(pPID, uintptr(pid), &info, syscall.WEXITED|unix.WNOWAIT); e != 0 {
		t.Fatal(e)
	}
	if liveGroups()[pid] || groupAlive(pid) {
		t.Errorf("group %d whose only member is a zombie counted as live", pid)
	}
	cmd.Wait()
	if liveGroups()[pid] || groupAlive(pid) {
		t.Errorf("group %d counted after its member was reaped", pid)
	}
}
