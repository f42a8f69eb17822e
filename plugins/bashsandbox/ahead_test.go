package bashsandbox_test

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dsh-dev/dsh/internal/proctest"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
	"github.com/dsh-dev/dsh/plugins/subprocess"
)

// A box started ahead serves the first session that opens a box: the session's first
// command runs in it — in its namespaces, confined (its workspace write allowed, a
// write outside refused), in cgroups of its own; the next session gets a box of its
// own; the box ends with its session.
func TestBoxAheadServesTheFirstSession(t *testing.T) {
	sup, ex, ws := verdictRig(t, &proctest.Buffer{})
	pid := startAhead(t, sup, bashsandbox.DefaultConfig().Network)
	if proctest.Gone(pid) {
		t.Fatalf("the box started ahead (%d) is gone", pid)
	}
	boxNS, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	o := <-callAsync(ex, "first", `readlink /proc/self/ns/pid; : > ok; if : > /etc/dsh-ahead-escape 2>/dev/null; then echo escaped; fi`)
	if o.err != nil || o.res.ExitCode == nil || *o.res.ExitCode != 0 {
		t.Fatalf("the call: %+v, %v", o.res, o.err)
	}
	if got := strings.TrimSpace(o.res.Stdout.Text); got != boxNS {
		t.Errorf("the first session's command ran in PID namespace %q, want the box started ahead's %q", got, boxNS)
	}
	if _, err := os.Stat(ws + "/ok"); err != nil {
		t.Errorf("the workspace write: %v", err)
	}
	if _, err := os.Stat("/etc/dsh-ahead-escape"); err == nil {
		os.Remove("/etc/dsh-ahead-escape")
		t.Error("a command of the box started ahead wrote outside its writable roots")
	}
	if pids := bashsandbox.BoxPids(sup); len(pids) != 1 || pids[0] != pid {
		t.Errorf("the session's boxes %v, want the one started ahead (%d)", pids, pid)
	}
	if bashsandbox.AheadPid(sup) != 0 {
		t.Error("the box started ahead is still offered after a session took it")
	}
	o = <-callAsync(ex, "second", `readlink /proc/self/ns/pid`)
	if o.err != nil || strings.TrimSpace(o.res.Stdout.Text) == boxNS {
		t.Errorf("the second session's command: %q, %v (the first's namespace %q)", o.res.Stdout.Text, o.err, boxNS)
	}
	bashsandbox.EndSession(sup, "first")
	waitFor(t, "the box started ahead to end with its session", func() bool { return proctest.Gone(pid) })
}

// A box started ahead that no session took ends when its row's activation does, and
// with its Supervisor.
func TestBoxAheadNotTakenEnds(t *testing.T) {
	for _, end := range []string{"activation", "supervisor"} {
		t.Run(end, func(t *testing.T) {
			noProcessLeft(t)
			sup := subprocess.New(subprocess.Options{SpillRoot: t.TempDir()})
			defer sup.Close()
			pid := startAhead(t, sup, bashsandbox.NetworkDeny)
			if end == "activation" {
				bashsandbox.DropAhead(sup)
			} else {
				sup.Close()
			}
			waitFor(t, "the box started ahead to end", func() bool { return proctest.Gone(pid) })
		})
	}
}

// A box started ahead that died before a session took it is replaced: the session's
// first call runs in a fresh box.
func TestBoxAheadThatDiedIsReplaced(t *testing.T) {
	sup, ex, _ := verdictRig(t, &proctest.Buffer{})
	pid := startAhead(t, sup, bashsandbox.DefaultConfig().Network)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the box started ahead to die", func() bool { return proctest.Gone(pid) })
	o := <-callAsync(ex, "first", "echo ran")
	if o.err != nil || o.res.Stdout.Text != "ran\n" {
		t.Fatalf("the call: %+v, %v", o.res, o.err)
	}
	if pids := bashsandbox.BoxPids(sup); len(pids) != 1 || pids[0] == pid {
		t.Errorf("the session's boxes %v (the dead one: %d)", pids, pid)
	}
}

// startAhead starts a box ahead on sup, as a server's row does, and returns its pid.
func startAhead(t *testing.T, sup *subprocess.Supervisor, network string) int {
	t.Helper()
	bashsandbox.ReadyAhead(sup, network)
	bashsandbox.OpenBoxAhead()
	pid := bashsandbox.AheadPid(sup)
	if pid == 0 {
		t.Fatal("no box started ahead")
	}
	return pid
}

// A call that an executor still serves after its activation ended (a reload swapped
// it out under the call) runs in a box of its own, which closes once its command is
// released: nothing of the ended executor stays open for the session.
func TestEndedExecutorsCallLeavesNoBox(t *testing.T) {
	noProcessLeft(t)
	sup := subprocess.New(subprocess.Options{SpillRoot: t.TempDir()})
	defer sup.Close()
	cfg := bashsandbox.DefaultConfig()
	cfg.Cwd = workspace(t)
	ex, end, err := bashsandbox.NewEnding(sup, cfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	if o := <-callAsync(ex, "swapped", "echo before"); o.err != nil || o.res.Stdout.Text != "before\n" {
		t.Fatalf("before the end: %+v, %v", o.res, o.err)
	}
	end()
	if o := <-callAsync(ex, "swapped", "echo after"); o.err != nil || o.res.Stdout.Text != "after\n" {
		t.Fatalf("after the end: %+v, %v", o.res, o.err)
	}
	waitFor(t, "no box left of the ended executor", func() bool { return len(boxChildren()) == 0 })
}

// boxChildren are this process's children that are boxes.
func boxChildren() []int {
	var out []int
	for _, pid := range proctest.Children() {
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if strings.Contains(string(cmd), "\x00"+bashsandbox.BoxArg) && !proctest.Gone(pid) {
			out = append(out, pid)
		}
	}
	return out
}
