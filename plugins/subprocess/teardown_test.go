package subprocess_test

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
)

// runConcurrently calls attempt from workers goroutines until want attempts reported
// true (conclusive), failing t if that takes more than maxAttempts.
func runConcurrently(t *testing.T, workers, want, maxAttempts int, attempt func() bool) {
	t.Helper()
	var conclusive, attempts atomic.Int32
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for conclusive.Load() < int32(want) && attempts.Add(1) <= int32(maxAttempts) && !t.Failed() {
				if attempt() {
					conclusive.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d attempts, %d conclusive", min(attempts.Load(), int32(maxAttempts)), conclusive.Load())
	if n := conclusive.Load(); n < int32(want) && !t.Failed() {
		t.Fatalf("only %d of %d attempts were conclusive", n, attempts.Load())
	}
}

// Each process of a tree receives at most one SIGTERM per teardown: a TERM trap runs
// once on a timeout, in cgroup mode (where the group and the cgroup both reach the
// shell) as in process-group mode.
func TestOneSIGTERMPerTimeout(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		var twice atomic.Int32
		runConcurrently(t, 16, 200, 800, func() bool {
			spec := bashSpec(`trap 'echo cleanup' TERM; echo ready; while :; do sleep 0.05; done`)
			spec.GraceMs = 60
			spec.Deadline = time.Now().Add(80 * time.Millisecond)
			p, err := sup.Spawn(t.Context(), spec)
			if err != nil {
				t.Error(err)
				return false
			}
			<-p.Done()
			ex, _ := p.Exit()
			out := p.Stdout().Output().Text
			if !strings.HasPrefix(out, "ready\n") || out == "ready\n" && ex.Signal == "SIGKILL" {
				// The deadline came before the trap was set, or (a starved machine) the
				// SIGKILL before the trap ran: neither says how often SIGTERM came.
				return false
			}
			if out != "ready\ncleanup\n" || ex.Reason != proc.ReasonTimeout || ex.Signal != "SIGKILL" {
				if strings.Count(out, "cleanup") > 1 {
					twice.Add(1)
				}
				t.Errorf("exit %+v, output %q; want the trap run once, then SIGKILL", ex, out)
			}
			return true
		})
		if n := twice.Load(); n > 0 {
			t.Errorf("%d timeouts ran the TERM trap more than once", n)
		}
	})
}

// pidfdOpen opens a pidfd for pid (-1 when it is gone).
func pidfdOpen(pid int) int {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1
	}
	return fd
}

// awaitExits polls the pidfds until every process has exited and returns when the last
// one did (as seen here: a late wake-up only makes the time later).
func awaitExits(fds []int) time.Time {
	pending := append([]int(nil), fds...)
	for len(pending) > 0 {
		pfds := make([]unix.PollFd, len(pending))
		for i, fd := range pending {
			pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
		}
		if _, err := unix.Poll(pfds, -1); err != nil && err != unix.EINTR {
			panic(err)
		}
		left := pending[:0]
		for i, fd := range pending {
			if pfds[i].Revents == 0 {
				left = append(left, fd)
			}
		}
		pending = left
	}
	return time.Now()
}

// A timed-out command settles promptly once its tree is gone: it never waits out
// graceMs (10 s here) once nothing is left (the bound, 2 s, leaves room for a loaded
// machine; the typical gap is logged), even when a grandchild (setsid in cgroup
// mode, where the cgroup reaches it; in the group otherwise) held the output pipes to
// the end. The tree's death is measured independently, with pidfds of its processes.
func TestTimeoutSettlesPromptlyOnceTheTreeIsGone(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		background := "sleep 30 &"
		if sup.UsesCgroups() {
			background = "setsid sleep 30 &"
		}
		var mu sync.Mutex
		var gaps []time.Duration
		runConcurrently(t, 10, 50, 200, func() bool {
			spec := bashSpec(`(` + background + ` echo $!); exec sleep 30`)
			spec.GraceMs = 10000
			deadline := time.Now().Add(150 * time.Millisecond)
			spec.Deadline = deadline
			p, err := sup.Spawn(t.Context(), spec)
			if err != nil {
				t.Error(err)
				return false
			}
			var settled time.Time
			doneWatch := make(chan struct{})
			go func() { <-p.Done(); settled = time.Now(); close(doneWatch) }()
			var grandchild int
			for time.Now().Before(deadline) && grandchild == 0 {
				grandchild, _ = strconv.Atoi(strings.TrimSpace(p.Stdout().Output().Text))
				time.Sleep(time.Millisecond) // polling interval
			}
			fds := []int{pidfdOpen(p.Pid()), pidfdOpen(grandchild)}
			defer func() {
				for _, fd := range fds {
					if fd >= 0 {
						unix.Close(fd)
					}
				}
			}()
			if grandchild == 0 || fds[0] < 0 || fds[1] < 0 || !time.Now().Before(deadline) {
				<-doneWatch
				return false // too slow to watch the tree before the deadline
			}
			dead := awaitExits(fds)
			select {
			case <-doneWatch:
			case <-time.After(20 * time.Second):
				t.Errorf("pid %d did not settle within 20s of its tree's death", p.Pid())
				return true
			}
			gap := settled.Sub(dead)
			if ex, _ := p.Exit(); ex.Reason != proc.ReasonTimeout {
				t.Errorf("exit %+v", ex)
			}
			if gap > 2*time.Second {
				t.Errorf("settled %v after the tree was gone (timeout at +150ms, grace 10s); want well before the grace", gap)
			}
			mu.Lock()
			gaps = append(gaps, gap)
			mu.Unlock()
			return true
		})
		mu.Lock()
		defer mu.Unlock()
		slowest := time.Duration(0)
		for _, g := range gaps {
			slowest = max(slowest, g)
		}
		t.Logf("%d runs; slowest settle after the tree's death: %v", len(gaps), slowest)
	})
}
