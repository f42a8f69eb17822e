package bashlocal_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/shell"
)

// isolationModes composes the harness once with cgroup isolation (skipped where cgroup
// v2 is not writable) and once forced to the process group alone.
func isolationModes(t *testing.T, bashConfig map[string]any, fn func(t *testing.T, rt *container.Runtime, ex shell.Executor, cgroups bool)) {
	for _, mode := range []string{"auto", "process-group"} {
		t.Run(mode, func(t *testing.T) {
			proctest.NoLeftovers(t)
			rt, ex := compose(t, map[string]any{"isolation": mode}, bashConfig)
			detail := rt.Status().Rows[0].Detail
			t.Logf("subprocess row: %s", detail)
			cgroups := strings.HasPrefix(detail, "process isolation: cgroup v2 at ")
			if mode == "auto" && !cgroups {
				t.Skipf("cgroup isolation unavailable on this host (%s)", detail)
			}
			if mode == "process-group" && detail != "process isolation: process group only (cgroups disabled by configuration)" {
				t.Errorf("detail %q", detail)
			}
			fn(t, rt, ex, cgroups)
		})
	}
}

// Issue item 2: a timed-out command's whole tree dies — a background sleep, a
// TERM-ignoring child and (with cgroups) a setsid double-forked daemon — and the call
// returns within timeout + grace + 1s.
func TestTreeKillOnTimeout(t *testing.T) {
	const timeoutMs, graceMs = 2000, 1000
	isolationModes(t, map[string]any{"graceMs": graceMs}, func(t *testing.T, rt *container.Runtime, ex shell.Executor, cgroups bool) {
		// The TERM-ignorer and the daemon start concurrently: each writes its own file,
		// so which is which never depends on which wrote first.
		dir := t.TempDir()
		pidFile, ignorerFile, daemonFile := filepath.Join(dir, "pids"), filepath.Join(dir, "ignorer"), filepath.Join(dir, "daemon")
		script := `
echo $$ > ` + pidFile + `
sleep 300 & echo $! >> ` + pidFile + `
( trap "" TERM; echo $BASHPID > ` + ignorerFile + `; exec sleep 300 ) &
setsid bash -c '( trap "" TERM; echo $BASHPID > ` + daemonFile + `; exec sleep 300 ) &' &
while [ ! -s ` + ignorerFile + ` ] || [ ! -s ` + daemonFile + ` ]; do sleep 0.01; done
echo ready
sleep 300
`
		spec, err := ex.Resolve(shell.ExecRequest{Command: script, TimeoutMs: ms(timeoutMs)})
		if err != nil {
			t.Fatal(err)
		}
		// The timeout counts from Execute; the clock starts when it returns, so only the
		// kill sequence and its bookkeeping count against the slack, not the spawn.
		x, err := ex.Execute(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		res, err := x.Result(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		pids := append(proctest.ReadPids(pidFile), append(proctest.ReadPids(ignorerFile), proctest.ReadPids(daemonFile)...)...)
		if len(pids) != 4 {
			t.Fatalf("pids %v (output %q %q)", pids, res.Stdout.Text, res.Stderr.Text)
		}
		leader, bgSleep, termIgnorer, daemon := pids[0], pids[1], pids[2], pids[3]
		t.Cleanup(func() { proctest.KillPids(pids...) })
		t.Logf("call returned after %v; leader %d, sleep %d, TERM-ignorer %d, setsid daemon %d", took, leader, bgSleep, termIgnorer, daemon)

		if limit := (timeoutMs + graceMs + 1000) * time.Millisecond; took > limit {
			t.Errorf("call took %v, want ≤ %v", took, limit)
		}
		if !res.TimedOut || res.Aborted || res.Signal != "SIGTERM" || res.ExitCode != nil || res.Stdout.Text != "ready\n" {
			t.Errorf("result %+v", res)
		}
		proctest.WaitFor(t, 5*time.Second, "the process group to be gone", func() bool {
			return proctest.AllGone(leader, bgSleep, termIgnorer)
		})
		if cgroups {
			proctest.WaitFor(t, 5*time.Second, "the setsid daemon to be gone (cgroup.kill)", func() bool { return proctest.Gone(daemon) })
			return
		}
		// The process group alone cannot reach a daemon that made its own session: that
		// is the documented limit of the fallback. It is still alive; clean it up.
		if proctest.Gone(daemon) {
			t.Errorf("setsid daemon %d gone in process-group mode (unexpected but harmless)", daemon)
		}
		proctest.KillPids(daemon)
		proctest.WaitFor(t, 5*time.Second, "cleanup of the daemon", func() bool { return proctest.Gone(daemon) })
	})
}

// Issue item 3: an orphan holding stdout cannot keep a foreground call open beyond
// graceMs after the leader exits.
func TestOrphanHoldingStdoutIsDrainBounded(t *testing.T) {
	const graceMs = 1000
	isolationModes(t, map[string]any{"graceMs": graceMs}, func(t *testing.T, rt *container.Runtime, ex shell.Executor, cgroups bool) {
		pidFile := filepath.Join(t.TempDir(), "pid")
		x := start(t, ex, shell.ExecRequest{Command: `(sleep 300 & echo $! > ` + pidFile + `); echo done`})
		// The bound counts from the leader's exit (seen here a little later, if anything).
		proctest.WaitFor(t, 10*time.Second, "the leader to exit", func() bool { return proctest.Gone(x.Pid()) })
		exited := time.Now()
		res, err := x.Result(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(exited)
		if res.Stdout.Text != "done\n" || exitCode(res) != "0" || res.TimedOut || res.Signal != "" {
			t.Errorf("result %+v", res)
		}
		if took > graceMs*time.Millisecond+time.Second {
			t.Errorf("call returned %v after the leader's exit, want within graceMs (%dms)", took, graceMs)
		}
		orphan := proctest.ReadPids(pidFile)
		if len(orphan) != 1 {
			t.Fatalf("orphan pid %v", orphan)
		}
		t.Logf("returned %v after the leader's exit; orphan %d alive: %v", took, orphan[0], !proctest.Gone(orphan[0]))
		// The orphan belongs to the subprocess service, which ends it when disposed.
		if err := rt.Unmount("subprocess"); err != nil {
			t.Fatal(err)
		}
		proctest.WaitFor(t, 5*time.Second, "disposal to end the orphan", func() bool { return proctest.Gone(orphan[0]) })
	})
}

// Issue item 4: nothing waits for a human.
func TestNothingWaitsForInput(t *testing.T) {
	proctest.NoLeftovers(t)
	_, ex := compose(t, nil, map[string]any{"timeoutMs": 30000})
	t.Run("stdin is /dev/null", func(t *testing.T) {
		res := run(t, ex, shell.ExecRequest{Command: `cat; read x; echo "read=$?"`})
		if res.Stdout.Text != "read=1\n" || res.TimedOut || exitCode(res) != "0" {
			t.Errorf("%+v", res)
		}
	})
	t.Run("no controlling terminal", func(t *testing.T) {
		res := run(t, ex, shell.ExecRequest{Command: `read x </dev/tty`})
		if res.TimedOut || exitCode(res) != "1" || !strings.Contains(res.Stderr.Text, "/dev/tty: No such device or address") {
			t.Errorf("%+v", res)
		}
	})
	t.Run("git never prompts for credentials", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("WWW-Authenticate", `Basic realm="dsh-test"`)
			w.WriteHeader(http.StatusUnauthorized)
		}))
		defer srv.Close()
		// An empty HOME and no system config: the only thing between git and a
		// credential prompt is the environment dsh sets (and the missing terminal).
		res := run(t, ex, shell.ExecRequest{
			Command: "git ls-remote " + srv.URL + "/repo.git",
			Env:     map[string]string{"HOME": t.TempDir(), "GIT_CONFIG_NOSYSTEM": "1", "XDG_CONFIG_HOME": t.TempDir()},
		})
		if res.TimedOut || exitCode(res) != "128" || !strings.Contains(res.Stderr.Text, "terminal prompts disabled") {
			t.Errorf("%+v", res)
		}
	})
	t.Run("no colours, pagers or prompts", func(t *testing.T) {
		res := run(t, ex, shell.ExecRequest{Command: `echo "$GIT_TERMINAL_PROMPT $TERM $PAGER $GIT_PAGER $NO_COLOR"`})
		if res.Stdout.Text != "0 dumb cat cat 1\n" {
			t.Errorf("%q", res.Stdout.Text)
		}
	})
}
