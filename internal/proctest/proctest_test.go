package proctest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
)

func TestMain(m *testing.M) { proctest.Main(m) }

func TestUntil(t *testing.T) {
	n := 0
	if !proctest.Until(10*time.Second, func() bool { n++; return n == 3 }) || n != 3 {
		t.Errorf("Until stopped after %d calls", n)
	}
	start := time.Now()
	if proctest.Until(50*time.Millisecond, func() bool { return false }) {
		t.Error("Until reported a condition that never held")
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Errorf("Until gave up after %s, before its deadline", took)
	}
}

// Children sees a child from its start until it is reaped (as a zombie, too), and
// WaitPidFile reads the pid it writes only once the line is whole.
func TestChildrenAndPidFile(t *testing.T) {
	dir := t.TempDir()
	path, gate := filepath.Join(dir, "pid"), filepath.Join(dir, "gate")
	cmd := exec.Command("bash", "-c", `printf $$ > `+proctest.Quote(path)+`; while [ ! -e `+proctest.Quote(gate)+` ]; do sleep 0.01; done; echo >> `+proctest.Quote(path))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !slices.Contains(proctest.Children(), pid) {
		t.Errorf("Children() = %v, without the child %d", proctest.Children(), pid)
	}
	proctest.WaitFor(t, 10*time.Second, "the partial pid file", func() bool { data, _ := os.ReadFile(path); return len(data) > 0 })
	got := make(chan int)
	go func() { got <- proctest.WaitPidFile(t, path) }()
	select {
	case p := <-got:
		t.Fatalf("WaitPidFile returned %d from a line without its newline", p)
	case <-time.After(100 * time.Millisecond):
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if p := <-got; p != pid {
		t.Errorf("WaitPidFile = %d, want %d", p, pid)
	}
	proctest.WaitFor(t, 10*time.Second, "the child's exit", func() bool { return proctest.State(pid) == 'Z' })
	if !slices.Contains(proctest.Children(), pid) {
		t.Error("Children() lost an unreaped zombie")
	}
	_ = cmd.Wait()
	if slices.Contains(proctest.Children(), pid) {
		t.Error("Children() still lists a reaped child")
	}
}

func TestQuote(t *testing.T) {
	for _, s := range []string{"", "plain", "it's", `'\''`, "a b", "$(id)", "`id`", "\n", "é"} {
		out, err := exec.Command("bash", "-c", "printf %s "+proctest.Quote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("Quote(%q) read back as %q, %v", s, out, err)
		}
	}
}

func TestRawRead(t *testing.T) {
	if n := proctest.RawRead(t, "head -c 100000 /dev/zero"); n != 100000 {
		t.Errorf("RawRead = %d bytes, want 100000", n)
	}
}

// A pid a test wrote down may name one of this process's threads by the time it is
// cleaned up (pids are reused): KillPids leaves it, and this process, alone, and still
// kills a process.
func TestKillPidsSparesThisProcessAndItsThreads(t *testing.T) {
	tid := make(chan int)
	release := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tid <- syscall.Gettid()
		<-release
	}()
	thread := <-tid
	defer close(release)
	proctest.KillPids(thread, os.Getpid()) // would end this test binary
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	proctest.KillPids(cmd.Process.Pid)
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("sleep after KillPids: %v, want killed", err)
	}
}
