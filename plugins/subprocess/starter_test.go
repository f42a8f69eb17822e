package subprocess_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
)

// fakeStarter starts leaders as children of the test process, as a box would as
// children of itself: the Supervisor never forks them, never waits for them and never
// reaps them; everything it learns comes through Started.
type fakeStarter struct {
	failCgroup error // Start fails with it when given a cgroup
	fail       error // Start fails with it

	mu       sync.Mutex
	requests []proc.StartRequest
	started  []*fakeLeader
}

type fakeLeader struct {
	pid  int
	lose chan struct{} // closed: Wait fails, as if the starter had died

	mu            sync.Mutex
	waited        bool
	released      int
	stateAtReap   string // the leader's /proc state when Release was called
	releaseBefore bool   // Release came before Wait returned
}

func (f *fakeStarter) Start(req proc.StartRequest) (proc.Started, error) {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	if f.failCgroup != nil && req.CgroupFD >= 0 {
		return nil, f.failCgroup
	}
	sys := &syscall.SysProcAttr{Setsid: true}
	if req.CgroupFD >= 0 {
		sys.UseCgroupFD, sys.CgroupFD = true, req.CgroupFD
	}
	pid, err := syscall.ForkExec(req.Path, req.Argv, &syscall.ProcAttr{
		Dir:   req.Dir,
		Env:   req.Env,
		Files: []uintptr{req.Files[0].Fd(), req.Files[1].Fd(), req.Files[2].Fd()},
		Sys:   sys,
	})
	if err != nil {
		return nil, err
	}
	l := &fakeLeader{pid: pid, lose: make(chan struct{})}
	f.mu.Lock()
	f.started = append(f.started, l)
	f.mu.Unlock()
	return l, nil
}

func (l *fakeLeader) Pid() int { return l.pid }

type siginfo struct {
	signo, errno, code, _ int32
	pid                   int32
	uid                   uint32
	status                int32
	_                     [100]byte
}

func (l *fakeLeader) Wait() (proc.Exit, error) {
	type result struct {
		st  proc.Exit
		err error
	}
	done := make(chan result, 1)
	go func() {
		var info siginfo
		for {
			_, _, e := syscall.Syscall6(syscall.SYS_WAITID, 1, uintptr(l.pid), uintptr(unsafe.Pointer(&info)), syscall.WEXITED|0x1000000, 0, 0)
			if e == syscall.EINTR {
				continue
			}
			if e != 0 {
				done <- result{err: e}
				return
			}
			break
		}
		if info.code == 2 || info.code == 3 {
			done <- result{st: proc.Signaled(syscall.Signal(info.status))}
			return
		}
		done <- result{st: proc.Exited(int(info.status))}
	}()
	defer func() {
		l.mu.Lock()
		l.waited = true
		l.mu.Unlock()
	}()
	select {
	case r := <-done:
		return r.st, r.err
	case <-l.lose:
		// The "sandbox" died: its children die with it (as in a PID namespace).
		syscall.Kill(-l.pid, syscall.SIGKILL)
		<-done
		l.reap()
		return proc.Exit{}, errors.New("the fake sandbox is gone")
	}
}

func (l *fakeLeader) Release() {
	l.mu.Lock()
	l.released++
	l.releaseBefore = !l.waited
	l.stateAtReap = procState(l.pid)
	l.mu.Unlock()
	l.reap()
}

func (l *fakeLeader) reap() {
	var ws syscall.WaitStatus
	syscall.Wait4(l.pid, &ws, syscall.WNOHANG, nil)
}

// procState is the state letter in /proc/<pid>/stat ("" when there is no such process).
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2 : i+3]
	}
	return ""
}

func (f *fakeStarter) only(t *testing.T) (proc.StartRequest, *fakeLeader) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.started) != 1 || len(f.requests) != 1 {
		t.Fatalf("%d requests, %d leaders started; want 1", len(f.requests), len(f.started))
	}
	return f.requests[0], f.started[0]
}

// A started leader is the Supervisor's like any other: the request carries the program
// found in PATH, the merged environment, the pipes and the tree's cgroup; the output is
// captured; the exit status is the starter's; Release comes once, after Wait, while the
// leader is still a zombie (so its group id cannot have been reused).
func TestStarterOwnsTheTree(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		f := &fakeStarter{}
		spec := bashSpec(`echo "out $FROM_CALLER"; echo err >&2; exit 3`)
		spec.Env = map[string]string{"FROM_CALLER": "yes"}
		spec.Start = f
		p := spawn(t, sup, spec)
		ex := proctest.AwaitExit(t, p, 10*time.Second)
		req, l := f.only(t)
		if ex.Code == nil || *ex.Code != 3 || ex.Signal != "" || p.State() != proc.Completed {
			t.Fatalf("exit %+v, state %v; want code 3, completed", ex, p.State())
		}
		if got := p.Stdout().Output().Text; got != "out yes\n" {
			t.Errorf("stdout %q", got)
		}
		if got := p.Stderr().Output().Text; got != "err\n" {
			t.Errorf("stderr %q", got)
		}
		if p.Pid() != l.pid {
			t.Errorf("Pid() = %d, the starter's leader is %d", p.Pid(), l.pid)
		}
		if !strings.HasPrefix(req.Path, "/") || !strings.HasSuffix(req.Path, "/bash") || req.Argv[0] != "bash" {
			t.Errorf("request path %q argv %q", req.Path, req.Argv)
		}
		if !containsEnv(req.Env, "FROM_CALLER=yes") || !containsEnv(req.Env, "NO_COLOR=1") {
			t.Errorf("request environment lacks the merged variables: %q", req.Env)
		}
		if (req.CgroupFD >= 0) != sup.UsesCgroups() {
			t.Errorf("CgroupFD %d with cgroups %v", req.CgroupFD, sup.UsesCgroups())
		}
		proctest.WaitFor(t, 10*time.Second, "the leader to be released", func() bool {
			l.mu.Lock()
			defer l.mu.Unlock()
			return l.released > 0
		})
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.released != 1 || l.releaseBefore || l.stateAtReap != "Z" {
			t.Errorf("released %d times, before Wait %v, leader state at release %q; want once, after Wait, a zombie", l.released, l.releaseBefore, l.stateAtReap)
		}
	})
}

func containsEnv(env []string, kv string) bool {
	for _, e := range env {
		if e == kv {
			return true
		}
	}
	return false
}

// Kill reaches a started tree through its process group (and cgroup): SIGTERM first,
// the descendants too, and nothing is left.
func TestStarterKillReachesTheTree(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		f := &fakeStarter{}
		pidFile := t.TempDir() + "/pid"
		spec := bashSpec(`sleep 300 & echo $! > ` + pidFile + `; echo ready; wait`)
		spec.Start = f
		p := spawn(t, sup, spec)
		waitOutput(t, p, "ready\n")
		child := proctest.ReadPids(pidFile)
		if len(child) != 1 {
			t.Fatalf("child pids %v", child)
		}
		if sup.UsesCgroups() {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(child[0]) + "/cgroup")
			if !strings.Contains(string(b), p.Cgroup()[strings.LastIndex(p.Cgroup(), "/"):]) {
				t.Errorf("the started tree is not in its cgroup %s: %q", p.Cgroup(), b)
			}
		}
		p.Kill()
		ex := proctest.AwaitExit(t, p, 10*time.Second)
		if ex.Signal != "SIGTERM" || ex.Reason != proc.ReasonKill || p.State() != proc.Killed {
			t.Fatalf("exit %+v; want SIGTERM by Kill", ex)
		}
		proctest.WaitFor(t, 5*time.Second, "the background child to die", func() bool { return proctest.Gone(child[0]) })
	})
}

// A leader the starter loses (the sandbox died) settles killed by SIGKILL at once, with
// the starter's error as the last line of its stderr, and is never released.
func TestStarterLostLeaderSettlesKilled(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		f := &fakeStarter{}
		spec := bashSpec(`echo -n partial >&2; echo ready; exec sleep 300`)
		spec.Start = f
		spec.GraceMs = 60000 // a settle must not wait for the grace period
		p := spawn(t, sup, spec)
		waitOutput(t, p, "ready\n")
		_, l := f.only(t)
		start := time.Now()
		close(l.lose)
		ex := proctest.AwaitExit(t, p, 10*time.Second)
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("settled %v after the loss", took)
		}
		if ex.Signal != "SIGKILL" || ex.Code != nil || p.State() != proc.Killed {
			t.Fatalf("exit %+v, state %v; want SIGKILL, killed", ex, p.State())
		}
		if got, want := p.Stderr().Output().Text, "partial\n[subprocess: the fake sandbox is gone]\n"; got != want {
			t.Fatalf("stderr %q, want %q", got, want)
		}
		if p.Kill() {
			t.Error("Kill() = true after settling")
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.released != 0 {
			t.Errorf("a lost leader was released %d times", l.released)
		}
	})
}

// A Start that fails leaves nothing: a *SpawnError comes back as is, anything else is
// wrapped in one; a cgroup fault is retried once without the cgroup.
func TestStarterFailures(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		want := &proc.SpawnError{Op: "chdir", Path: "/nowhere", Err: syscall.ENOENT}
		spec := bashSpec("true")
		spec.Start = &fakeStarter{fail: want}
		if _, err := sup.Spawn(context.Background(), spec); err != want {
			t.Fatalf("Spawn error %v, want the starter's %v", err, want)
		}
		spec.Start = &fakeStarter{fail: errors.New("no sandbox")}
		_, err := sup.Spawn(context.Background(), spec)
		var se *proc.SpawnError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), "no sandbox") {
			t.Fatalf("Spawn error %v, want a SpawnError carrying the cause", err)
		}
		f := &fakeStarter{failCgroup: syscall.EPERM}
		spec.Start = f
		p := spawn(t, sup, spec)
		proctest.AwaitExit(t, p, 10*time.Second)
		f.mu.Lock()
		n := len(f.requests)
		f.mu.Unlock()
		if sup.UsesCgroups() && n != 2 || !sup.UsesCgroups() && n != 1 {
			t.Errorf("%d start requests with cgroups %v", n, sup.UsesCgroups())
		}
	})
}
