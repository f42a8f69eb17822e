package subprocess

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/proc"
)

// cgroupSup returns a Supervisor in cgroup mode, or skips.
func cgroupSup(t *testing.T, opts Options) *Supervisor {
	t.Helper()
	opts.SpillRoot = t.TempDir()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := New(opts)
	t.Cleanup(s.Close)
	if s.cgRoot == nil {
		t.Skipf("cgroup isolation unavailable: %s", s.Isolation())
	}
	return s
}

func spawnBash(t *testing.T, s *Supervisor, script string) *Process {
	t.Helper()
	p, err := s.Spawn(context.Background(), Spec{Argv: []string{"bash", "-c", script}, GraceMs: 1000,
		Stdout: proc.Capture{MaxBytes: 4096}, Stderr: proc.Capture{MaxBytes: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func waitStdout(t *testing.T, p *Process, want string) {
	t.Helper()
	proctest.WaitFor(t, 10*time.Second, "output "+want, func() bool { return strings.Contains(p.stdout.Output().Text, want) })
}

// sigPending is the process-wide pending signal mask of pid (ShdPnd).
func sigPending(t *testing.T, pid int) uint64 {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "ShdPnd:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no ShdPnd in /proc/%d/status", pid)
	return 0
}

func readCgroupFile(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(dir + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// While signalCgroup reads cgroup.procs and signals the pids, the cgroup is frozen (so no
// listed pid can exit and be reused); afterwards it is thawed and the signal is handled.
func TestSignalCgroupFreezesAroundTheSignals(t *testing.T) {
	proctest.NoLeftovers(t)
	s := cgroupSup(t, Options{})
	p := spawnBash(t, s, `trap 'echo term' TERM; echo ready; while :; do sleep 0.05; done`)
	waitStdout(t, p, "ready")
	dir := p.cg.path

	start := time.Now()
	if !freezeCgroup(dir) {
		t.Fatalf("freezeCgroup(%s) = false; events %q", dir, readCgroupFile(t, dir, "cgroup.events"))
	}
	t.Logf("froze in %v", time.Since(start))
	if ev := readCgroupFile(t, dir, "cgroup.events"); !strings.Contains(ev, "frozen 1") {
		t.Errorf("after freezeCgroup: cgroup.events %q", ev)
	}
	// A frozen process does not run: SIGTERM stays pending until the thaw.
	signalCgroupProcs(dir, syscall.SIGTERM)
	if pending := sigPending(t, p.pid); pending&(1<<(syscall.SIGTERM-1)) == 0 {
		t.Errorf("SIGTERM not pending while frozen (ShdPnd %#x)", pending)
	}
	if out := p.stdout.Output().Text; strings.Contains(out, "term") {
		t.Errorf("the trap ran while frozen: %q", out)
	}
	thawCgroup(dir)
	waitStdout(t, p, "term")

	// signalCgroup itself leaves the cgroup thawed.
	signalCgroup(dir, syscall.SIGTERM)
	if f := strings.TrimSpace(readCgroupFile(t, dir, "cgroup.freeze")); f != "0" {
		t.Errorf("cgroup.freeze = %q after signalCgroup", f)
	}
	proctest.WaitFor(t, 10*time.Second, "a second trap", func() bool { return strings.Count(p.stdout.Output().Text, "term") == 2 })

	// A cgroup someone else froze is not thawed by us.
	if err := os.WriteFile(dir+"/cgroup.freeze", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	if !waitFrozen(dir, 10*time.Second) {
		t.Fatal("did not freeze")
	}
	if freezeCgroup(dir) {
		t.Error("freezeCgroup claimed a cgroup that was already frozen")
	}
	signalCgroup(dir, syscall.SIGTERM)
	if f := strings.TrimSpace(readCgroupFile(t, dir, "cgroup.freeze")); f != "1" {
		t.Errorf("cgroup.freeze = %q: another's freeze was undone", f)
	}
	os.WriteFile(dir+"/cgroup.freeze", []byte("0"), 0)
	proctest.WaitFor(t, 10*time.Second, "the third trap after the thaw", func() bool { return strings.Count(p.stdout.Output().Text, "term") == 3 })
	p.Kill()
	<-p.Done()
}

// Freezing is optional: a directory without cgroup.freeze is signalled unfrozen.
func TestFreezeUnavailable(t *testing.T) {
	dir := t.TempDir()
	if freezeCgroup(dir) {
		t.Error("freezeCgroup succeeded on a plain directory")
	}
	if waitFrozen(dir, time.Millisecond) {
		t.Error("waitFrozen succeeded on a plain directory")
	}
}

// failCgroupSpawns makes the next n spawns into a cgroup fail with errno, counting the
// attempts to spawn into a cgroup.
func failCgroupSpawns(t *testing.T, errno syscall.Errno, n int) *atomic.Int32 {
	t.Helper()
	var left, attempts atomic.Int32
	left.Store(int32(n))
	cgroupSpawnFault = func() error {
		attempts.Add(1)
		if left.Add(-1) >= 0 {
			return errno
		}
		return nil
	}
	t.Cleanup(func() { cgroupSpawnFault = nil })
	return &attempts
}

// A transient shortage (EAGAIN) fails that one spawn, as it would without cgroups, and
// never turns cgroups off.
func TestEAGAINDoesNotDisableCgroups(t *testing.T) {
	proctest.NoLeftovers(t)
	var changes atomic.Int32
	s := cgroupSup(t, Options{OnIsolationChange: func(string) { changes.Add(1) }})
	failCgroupSpawns(t, syscall.EAGAIN, 5)
	for i := 0; i < 5; i++ {
		_, err := s.Spawn(context.Background(), Spec{Argv: []string{"true"}, GraceMs: 1000, Stdout: proc.Capture{MaxBytes: 1}, Stderr: proc.Capture{MaxBytes: 1}})
		var se *proc.SpawnError
		if !errors.As(err, &se) || !errors.Is(err, syscall.EAGAIN) {
			t.Fatalf("spawn %d: %v; want a SpawnError with EAGAIN", i, err)
		}
	}
	if s.cgRoot == nil || changes.Load() != 0 || !strings.HasPrefix(s.Isolation(), "cgroup v2 at ") {
		t.Fatalf("EAGAIN turned cgroups off: %s", s.Isolation())
	}
	p := spawnBash(t, s, "exit 3")
	<-p.Done()
	if p.cg == nil {
		t.Error("the next command got no cgroup")
	}
	if ex, _ := p.Exit(); ex.Code == nil || *ex.Code != 3 {
		t.Errorf("exit %+v", ex)
	}
}

// A cgroup fault (EACCES from the clone into the cgroup) lets the command run under its
// process group; only maxCgroupFailures such spawns in a row turn cgroups off.
func TestRepeatedCgroupFaultsDisableCgroups(t *testing.T) {
	proctest.NoLeftovers(t)
	var changed atomic.Value
	s := cgroupSup(t, Options{OnIsolationChange: func(iso string) { changed.Store(iso) }})
	run := func(want int) *Process {
		t.Helper()
		p := spawnBash(t, s, "exit "+string(rune('0'+want)))
		<-p.Done()
		if ex, _ := p.Exit(); ex.Code == nil || *ex.Code != want {
			t.Fatalf("exit %+v, want %d", ex, want)
		}
		return p
	}
	attempts := failCgroupSpawns(t, syscall.EACCES, maxCgroupFailures-1)
	for i := 0; i < maxCgroupFailures-1; i++ {
		if p := run(1); p.cg != nil {
			t.Errorf("a command whose cgroup spawn failed reports cgroup %s", p.cg.path)
		}
	}
	if s.cgRoot == nil {
		t.Fatalf("cgroups off after %d faults: %s", maxCgroupFailures-1, s.Isolation())
	}
	if p := run(2); p.cg == nil { // a success ends the run of failures
		t.Error("no cgroup once the clone works again")
	}
	failCgroupSpawns(t, syscall.EACCES, maxCgroupFailures)
	for i := 0; i < maxCgroupFailures; i++ {
		run(4)
	}
	const want = "process group only (spawning into a cgroup failed: EACCES (permission denied))"
	if s.cgRoot != nil || s.Isolation() != want || changed.Load() != want {
		t.Fatalf("after %d faults in a row: isolation %q, reported %v", maxCgroupFailures, s.Isolation(), changed.Load())
	}
	before := attempts.Load()
	run(5)
	if attempts.Load() != before {
		t.Error("a spawn still tried a cgroup after the fallback")
	}
}
