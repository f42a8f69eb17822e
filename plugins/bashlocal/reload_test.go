package bashlocal_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/proc"
	"github.com/dsh-dev/dsh/shell"
)

// Issue item 7: reloading or removing the executor never touches a running process;
// disposing the subprocess service kills, waits and settles.
func TestReloadSafety(t *testing.T) {
	proctest.NoLeftovers(t)
	rt := newRuntime(t)
	sc := map[string]any{"spillRoot": t.TempDir()}
	if err := rt.Compose("test", rows(sc, nil)); err != nil {
		t.Fatal(err)
	}
	ex := executor(t, rt)
	gate := filepath.Join(t.TempDir(), "gate")
	bg := start(t, ex, shell.ExecRequest{
		Command: `echo $$; while [ ! -e ` + gate + ` ]; do sleep 0.01; done; echo after-reload; sleep 60`,
		Expiry:  shell.ExpiryNone,
	})
	pid, _ := strconv.Atoi(strings.TrimSpace(readUntil(t, bg, "\n")))
	if pid <= 0 || pid != bg.Pid() {
		t.Fatalf("echo $$ = %d, Pid() = %d", pid, bg.Pid())
	}
	finished := start(t, ex, shell.ExecRequest{Command: "echo finished; exit 5"})
	finishedRes, err := finished.Result(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	alive := func(when string) {
		t.Helper()
		if proctest.Gone(pid) || proctest.ExitState(bg) != proc.Running {
			t.Fatalf("%s: pid %d gone=%v status %+v", when, pid, proctest.Gone(pid), proctest.ExitState(bg))
		}
	}

	// A config change restarts the bash row only.
	if err := rt.Compose("test", rows(sc, map[string]any{"timeoutMs": 5000})); err != nil {
		t.Fatal(err)
	}
	alive("after a bash-local restart")
	if ex2 := executor(t, rt); ex2 == ex {
		t.Error("the executor was not replaced by the restart")
	}

	// Disposing the bash-local fiber.
	if err := rt.Unmount("bash"); err != nil {
		t.Fatal(err)
	}
	if _, ok := container.Lookup(rt, shell.Service); ok {
		t.Error("shell still provided after unmount")
	}
	alive("after unmounting bash-local")
	os.WriteFile(gate, nil, 0o600)
	if got := readUntil(t, bg, "after-reload\n"); got != "after-reload\n" {
		t.Errorf("read through the handle after the unload: %q", got)
	}
	alive("after reading")

	// Mounted again, new calls work.
	if err := rt.Mount(container.Row{ID: "bash", Plugin: "bash-local"}); err != nil {
		t.Fatal(err)
	}
	ex = executor(t, rt)
	if res := run(t, ex, shell.ExecRequest{Command: "echo again"}); res.Stdout.Text != "again\n" {
		t.Errorf("call after remount: %+v", res)
	}
	trapper := start(t, ex, shell.ExecRequest{Command: `trap 'echo term' TERM; echo ready; while :; do sleep 0.05; done`, Expiry: shell.ExpiryNone})
	readUntil(t, trapper, "ready")

	// Disposing subprocess: bash-local unloads first (pending), then every tree dies.
	start := time.Now()
	if err := rt.Unmount("subprocess"); err != nil {
		t.Fatal(err)
	}
	t.Logf("subprocess disposal took %v", time.Since(start))
	st := rt.Status()
	if len(st.Rows) != 1 || st.Rows[0].ID != "bash" || st.Rows[0].State != container.StatePending || !slices.Equal(st.Rows[0].Missing, []string{"subprocess"}) {
		t.Errorf("status after disposal: %+v", st.Rows)
	}
	for _, c := range []struct {
		x      shell.Execution
		signal string
	}{{bg, "SIGTERM"}, {trapper, "SIGKILL"}} {
		select {
		case <-c.x.Done():
		default:
			t.Fatalf("pid %d not settled when disposal returned", c.x.Pid())
		}
		if s, ok := c.x.Exit(); !ok || s.State() != proc.Killed || s.Signal != c.signal || s.Code != nil {
			t.Errorf("pid %d status %+v, want killed by %s", c.x.Pid(), s, c.signal)
		}
		res, err := c.x.Result(context.Background())
		if err != nil || res.Signal != c.signal || res.TimedOut || res.Aborted {
			t.Errorf("pid %d result %+v %v", c.x.Pid(), res, err)
		}
		if !proctest.Gone(c.x.Pid()) {
			t.Errorf("pid %d alive after disposal", c.x.Pid())
		}
		if c.x.Kill() {
			t.Errorf("Kill() = true after disposal")
		}
	}
	after, err := finished.Result(context.Background())
	if err != nil || !reflect.DeepEqual(after, finishedRes) || exitCode(after) != "5" || proctest.ExitState(finished) != proc.Completed {
		t.Errorf("finished handle changed: %+v → %+v (%v)", finishedRes, after, err)
	}
}

// Issue item 8: 200 concurrent foreground calls and 100 concurrent background
// executions, all correct; no fd or goroutine leaked.
func TestLoad(t *testing.T) {
	proctest.NoLeftovers(t)
	fds := proctest.FDs(t)
	rt, ex := compose(t, nil, nil)
	run(t, ex, shell.ExecRequest{Command: "echo warm-up"})

	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Go(func() {
			spec, err := ex.Resolve(shell.ExecRequest{Command: fmt.Sprintf("echo fg-%d", i)})
			if err != nil {
				t.Errorf("resolve %d: %v", i, err)
				return
			}
			x, err := ex.Execute(context.Background(), spec)
			if err != nil {
				t.Errorf("execute %d: %v", i, err)
				return
			}
			res, err := x.Result(context.Background())
			if err != nil || res.Stdout.Text != fmt.Sprintf("fg-%d\n", i) || exitCode(res) != "0" || res.Stderr.Text != "" {
				t.Errorf("fg %d: %+v %v", i, res, err)
			}
		})
	}
	bgs := make([]shell.Execution, 100)
	for i := range bgs {
		wg.Go(func() {
			spec, _ := ex.Resolve(shell.ExecRequest{Command: fmt.Sprintf("echo bg-%d; sleep 0.2; echo bg-%d-end >&2", i, i), Expiry: shell.ExpiryNone})
			x, err := ex.Execute(context.Background(), spec)
			if err != nil {
				t.Errorf("execute bg %d: %v", i, err)
				return
			}
			bgs[i] = x
		})
	}
	wg.Wait()
	for i, x := range bgs {
		if x == nil {
			continue
		}
		waitDone(t, x, 60*time.Second)
		want := fmt.Sprintf("bg-%d\n[stderr]\nbg-%d-end\n", i, i)
		if r := x.ReadOutput(); r.Delta != want || r.Lossy {
			t.Errorf("bg %d read %+v", i, r)
		}
		if s, ok := x.Exit(); !ok || s.State() != proc.Completed || s.Code == nil || *s.Code != 0 {
			t.Errorf("bg %d status %+v", i, s)
		}
	}
	// While the harness runs, the only new descriptors are the few empty cgroups the
	// supervisor keeps for reuse (at most 8, each its directory and its cgroup.events),
	// the output pipes it makes ahead for the next command (two, both ends), its own
	// cgroup directory (held locked),
	// the pipe to its crash-cleanup watchdog and the eventfd that stops its supervision,
	// and the /dev/null every command's stdin shares; closing it releases them too.
	// A settled command's pipes are closed right after its result is out: look until
	// they are.
	unexpected := func() (leaked, kept []string) {
		pipes, nulls, eventfds := 0, 0, 0
		for _, fd := range proctest.NewFDs(fds, proctest.FDs(t)) {
			switch {
			case strings.Contains(fd, "/sys/fs/cgroup/"):
				kept = append(kept, fd)
			case strings.Contains(fd, "pipe:") && pipes < 1+2*2:
				pipes++
			case strings.HasSuffix(fd, "→ /dev/null") && nulls == 0:
				nulls++
			case strings.HasSuffix(fd, "anon_inode:[eventfd]") && eventfds == 0:
				eventfds++
			default:
				leaked = append(leaked, fd)
			}
		}
		return leaked, kept
	}
	leaked, kept := unexpected()
	for deadline := time.Now().Add(10 * time.Second); len(leaked) > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		leaked, kept = unexpected()
	}
	for _, fd := range leaked {
		t.Errorf("file descriptor leaked: %s", fd)
	}
	if len(kept) > 2*8+1 {
		t.Errorf("%d cgroup descriptors kept: %v", len(kept), kept)
	}
	rt.Close()
	if leaked := proctest.NewFDs(fds, proctest.FDs(t)); len(leaked) != 0 {
		t.Errorf("file descriptors leaked: %v", leaked)
	}
	goleak.VerifyNone(t)
}
