package subprocess_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
)

// Helper processes: the test binary re-executed with DSH_TEST_HELPER set runs
// TestHelperProcess as a small harness of its own, which another test then kills.
const (
	helperVar    = "DSH_TEST_HELPER"
	helperOutVar = "DSH_TEST_HELPER_OUT"
)

// startHelper runs the helper mode in a re-executed test binary and returns it with
// the lines of its report once that is complete (its last line is "end").
func startHelper(t *testing.T, mode string, wrap ...string) (*exec.Cmd, []string) {
	t.Helper()
	report := filepath.Join(t.TempDir(), "report")
	args := []string{os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1", "-test.timeout=5m"}
	if len(wrap) > 0 {
		args = append(wrap, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), helperVar+"="+mode, helperOutVar+"="+report)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	var lines []string
	proctest.WaitFor(t, 30*time.Second, "the helper's report", func() bool {
		// A helper whose mode ends once it reported exits then: the report is read
		// before its exit is looked at.
		data, _ := os.ReadFile(report)
		lines = strings.Split(strings.TrimSpace(string(data)), "\n")
		if lines[len(lines)-1] == "end" {
			return true
		}
		select {
		case <-exited:
			t.Fatalf("the helper exited: %s", out.String())
		default:
		}
		return false
	})
	return cmd, lines[:len(lines)-1]
}

// field returns the value of the report line "<key> <value>".
func field(t *testing.T, lines []string, key string) string {
	t.Helper()
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, key+" "); ok {
			return v
		}
	}
	t.Fatalf("no %q in the helper's report %q", key, lines)
	return ""
}

func pidsOf(t *testing.T, text string) []int {
	t.Helper()
	var pids []int
	for _, f := range strings.Fields(text) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid %q: %v", f, err)
		}
		pids = append(pids, pid)
	}
	return pids
}

func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperVar)
	if mode == "" {
		t.Skip("a helper process for other tests")
	}
	var report strings.Builder
	finish := func() {
		report.WriteString("end\n")
		path := os.Getenv(helperOutVar)
		if err := os.WriteFile(path+".tmp", []byte(report.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	spillRoot := filepath.Dir(os.Getenv(helperOutVar))
	switch mode {
	case "crash-cgroup", "crash-process-group":
		sup := subprocess.New(subprocess.Options{DisableCgroups: mode == "crash-process-group", SpillRoot: spillRoot})
		run := func(script string, deadline bool) *subprocess.Process {
			spec := bashSpec(script)
			if deadline {
				spec.Deadline = time.Now().Add(10 * time.Minute)
			}
			p, err := sup.Spawn(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		started := func(p *subprocess.Process) string {
			proctest.WaitFor(t, 10*time.Second, "a pid", func() bool { return strings.HasSuffix(p.Stdout().Output().Text, "\n") })
			return strings.TrimSpace(p.Stdout().Output().Text)
		}
		foreground := run("echo $$; exec sleep 300", true)
		background := run("echo $$; exec sleep 300", false)
		nohup := run("nohup sleep 300 </dev/null >/dev/null 2>&1 & echo $!", false)
		pids := []string{started(foreground), started(background), started(nohup)}
		if sup.UsesCgroups() {
			escapee := run("setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!", false)
			pids = append(pids, started(escapee))
			fmt.Fprintf(&report, "cgroup %s\n", strings.TrimPrefix(sup.Isolation(), "cgroup v2 at "))
		}
		fmt.Fprintf(&report, "pids %s\nwatchdog %d\n", strings.Join(pids, " "), sup.WatchdogPid())
		finish()
		time.Sleep(5 * time.Minute) // until the test kills this process
	case "crash-limits", "crash-limits-process-group":
		// Commands under resource limits: their v1 directories are the watchdog's too.
		sup := subprocess.New(subprocess.Options{DisableCgroups: mode == "crash-limits-process-group", SpillRoot: spillRoot})
		var pids, dirs []string
		for _, script := range []string{"echo $$; exec sleep 300", "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!"} {
			spec := bashSpec(script)
			spec.Owner, spec.Resources = "crash", proc.ResourceLimits{Memory: 256 << 20, Processes: 50}
			p, err := sup.Spawn(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			proctest.WaitFor(t, 10*time.Second, "a pid", func() bool { return strings.HasSuffix(p.Stdout().Output().Text, "\n") })
			pids = append(pids, strings.TrimSpace(p.Stdout().Output().Text))
			for _, d := range p.LimitCgroups() {
				dirs = append(dirs, filepath.Dir(filepath.Dir(d))) // the instance directory
			}
		}
		fmt.Fprintf(&report, "pids %s\ndirs %s\nwatchdog %d\n", strings.Join(pids, " "), strings.Join(dirs, " "), sup.WatchdogPid())
		finish()
		time.Sleep(5 * time.Minute) // until the test kills this process
	case "restart-cgroup", "restart-process-group":
		restartHelper(t, mode == "restart-process-group", spillRoot, &report)
		finish()
		time.Sleep(5 * time.Minute) // until the test kills this process
	case "fds":
		var st unix.Stat_t
		flags, err := unix.FcntlInt(7, unix.F_GETFD, 0)
		fmt.Fprintf(&report, "inherited %v %v\n", unix.Fstat(7, &st) == nil, err == nil && flags&unix.FD_CLOEXEC == 0)
		sup := subprocess.New(subprocess.Options{SpillRoot: spillRoot})
		p, err := sup.Spawn(context.Background(), bashSpec(`echo leaked >&7 || echo no-fd-7; exec sleep 30`))
		if err != nil {
			t.Fatal(err)
		}
		proctest.WaitFor(t, 10*time.Second, "the probe", func() bool {
			return strings.Contains(p.Stdout().Output().Text, "no-fd-7") || p.State() != proc.Running
		})
		var fds []string
		proctest.WaitFor(t, 10*time.Second, "the exec of sleep", func() bool {
			exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.Pid()))
			return strings.HasSuffix(exe, "/sleep")
		})
		// What sleep opens itself while it starts (a locale file) comes and goes; what
		// matters is every descriptor that names the inherited file.
		entries, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.Pid()))
		for _, e := range entries {
			target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p.Pid(), e.Name()))
			fds = append(fds, e.Name()+"="+target)
		}
		fmt.Fprintf(&report, "probe %s\nfds %s\n", strings.TrimSpace(p.Stdout().Output().Text), strings.Join(fds, " "))
		sup.Close()
		fmt.Fprintf(&report, "still-open %v\n", unix.Fstat(7, &st) == nil)
		finish()
	case "start":
		logs := &proctest.Buffer{}
		sup := subprocess.New(subprocess.Options{SpillRoot: spillRoot, Logger: logs.Logger()})
		fmt.Fprintf(&report, "isolation %s\n", sup.Isolation())
		sup.Close()
		fmt.Fprintf(&report, "logs %s\n", strings.ReplaceAll(strings.TrimSpace(logs.String()), "\n", " | "))
		finish()
	default:
		t.Fatalf("unknown helper mode %q", mode)
	}
}

// If the harness dies by SIGKILL, its watchdog ends every process it started within
// 2 s: in cgroup mode the foreground and background commands, a nohup child and a
// setsid escapee (the whole cgroup); in process-group mode every process group it was
// told about. Then the watchdog removes the harness's cgroup and exits.
func TestCrashCleanup(t *testing.T) {
	for _, mode := range []string{"crash-cgroup", "crash-process-group"} {
		t.Run(strings.TrimPrefix(mode, "crash-"), func(t *testing.T) {
			proctest.NoLeftovers(t)
			if mode == "crash-cgroup" {
				if probe := subprocess.New(subprocess.Options{SpillRoot: t.TempDir()}); !probe.UsesCgroups() {
					probe.Close()
					t.Skipf("cgroup isolation unavailable: %s", probe.Isolation())
				} else {
					probe.Close()
				}
			}
			helper, report := startHelper(t, mode)
			pids := pidsOf(t, field(t, report, "pids"))
			watchdog := pidsOf(t, field(t, report, "watchdog"))[0]
			if want := map[string]int{"crash-cgroup": 4, "crash-process-group": 3}[mode]; len(pids) != want || !slices.ContainsFunc(pids, func(p int) bool { return !proctest.Gone(p) }) {
				t.Fatalf("helper's processes %v (want %d running)", pids, want)
			}
			for _, pid := range append(pids, watchdog) {
				if proctest.Gone(pid) {
					t.Fatalf("pid %d not running before the kill", pid)
				}
			}
			if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			proctest.WaitFor(t, 2*time.Second, fmt.Sprintf("the processes %v to be gone within 2s of the SIGKILL", pids), func() bool {
				return proctest.AllGone(pids...)
			})
			t.Logf("all gone %v after the SIGKILL", time.Since(killed))
			proctest.WaitFor(t, 10*time.Second, "the watchdog to exit", func() bool { return proctest.Gone(watchdog) })
			if mode == "crash-cgroup" {
				dir := field(t, report, "cgroup")
				proctest.WaitFor(t, 10*time.Second, "the harness's cgroup to be removed", func() bool {
					_, err := os.Stat(dir)
					return os.IsNotExist(err)
				})
			}
		})
	}
}

// The watchdog holds none of the harness's stdio (only its pipe and /dev/null), leads a
// session of its own, lives outside the cgroup it guards, and exits when the
// Supervisor closes.
func TestWatchdogProcess(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		wd := sup.WatchdogPid()
		if wd <= 0 || proctest.Gone(wd) {
			t.Fatalf("watchdog pid %d not running", wd)
		}
		// The watchdog may still be starting, and the Go runtime reads a few /proc files
		// now and then (the dynamic loader, the cgroup CPU limit): wait until it holds
		// only what it keeps.
		var fds map[string]string
		settled := func() bool {
			fds = map[string]string{}
			entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", wd))
			if err != nil {
				return false
			}
			for _, e := range entries {
				fds[e.Name()], _ = os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", wd, e.Name()))
			}
			if !strings.HasPrefix(fds["0"], "pipe:") || fds["1"] != "/dev/null" || fds["2"] != "/dev/null" {
				return false
			}
			for fd, target := range fds {
				// Beyond 0-2 only what the Go runtime opens itself (cgroup CPU limits).
				if n, _ := strconv.Atoi(fd); n > 2 && !strings.HasPrefix(target, "/sys/fs/cgroup/") {
					return false
				}
			}
			return true
		}
		ok, deadline := settled(), time.Now().Add(10*time.Second)
		for !ok && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
			ok = settled()
		}
		if !ok {
			t.Errorf("watchdog descriptors %v; want 0 = its pipe, 1 and 2 = /dev/null, and only the Go runtime's cgroup files besides", fds)
		}
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", wd))
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
		if f[3] != strconv.Itoa(wd) {
			t.Errorf("watchdog session %s, want its own (%d)", f[3], wd)
		}
		if sup.UsesCgroups() {
			own, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", wd))
			dir := strings.TrimPrefix(sup.Isolation(), "cgroup v2 at ")
			if strings.Contains(string(own), filepath.Base(dir)) {
				t.Errorf("the watchdog lives in the cgroup it guards: %s", own)
			}
		}
		if ppid := f[1]; ppid == strconv.Itoa(os.Getpid()) {
			t.Errorf("the watchdog is a child of the harness")
		}
		p := spawn(t, sup, bashSpec("true"))
		proctest.AwaitExit(t, p, 10*time.Second)
		sup.Close()
		proctest.WaitFor(t, 10*time.Second, "the watchdog to exit after Close", func() bool { return proctest.Gone(wd) })
	})
}

// A harness that starts where a dead one left commands running in its cgroup kills
// them and removes the cgroup, and says so at WARN with the count. A directory whose
// lock a live process holds is left alone, whatever its pid says (another pid
// namespace's harness).
//
// The harness that starts is a helper process in a parent cgroup of this test's own: a
// dsh started meanwhile elsewhere (another package's tests) sweeps its own parent, and
// would otherwise take the planted directories first.
func TestStartKillsWhatDeadInstancesLeft(t *testing.T) {
	proctest.NoLeftovers(t)
	probe := subprocess.New(subprocess.Options{SpillRoot: t.TempDir()})
	root, ok := strings.CutPrefix(probe.Isolation(), "cgroup v2 at ")
	probe.Close()
	if !ok {
		t.Skipf("cgroup isolation unavailable: %s", probe.Isolation())
	}
	suffix := make([]byte, 4)
	rand.Read(suffix)
	base := filepath.Join(filepath.Dir(root), "dshtest-"+hex.EncodeToString(suffix)) // no dsh's "dsh-" prefix
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// After every process in it is gone (the cleanups below run first).
		proctest.WaitFor(t, 10*time.Second, "the test's parent cgroup to be removable", func() bool {
			return os.Remove(base) == nil || os.IsNotExist(os.Remove(base))
		})
	})
	// commandIn starts a process in a new cgroup dir/c<n>.
	commandIn := func(dir string, n int) *exec.Cmd {
		t.Helper()
		cg := filepath.Join(dir, "c"+strconv.Itoa(n))
		if err := os.MkdirAll(cg, 0o755); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(cg, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		cmd := exec.Command("sleep", "300")
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd, Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	dead := filepath.Join(base, fmt.Sprintf("dsh-%d-cafe", deadPid(t)))
	a, b := commandIn(dead, 1), commandIn(dead, 2)
	os.Mkdir(filepath.Join(dead, "c3"), 0o755) // empty
	locked := filepath.Join(base, fmt.Sprintf("dsh-%d-beef", deadPid(t)))
	c := commandIn(locked, 1)
	lock, err := unix.Open(locked, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(lock, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.Close(lock)
		c.Process.Kill()
		c.Wait()
		os.Remove(filepath.Join(locked, "c1"))
		os.Remove(locked)
	})

	t.Cleanup(func() { os.Remove(filepath.Join(dead, "c3")); os.Remove(dead) }) // if the test fails
	// The helper moves itself into base, then execs the test binary as the harness.
	_, report := startHelper(t, "start", "sh", "-c", `echo $$ > "$1/cgroup.procs" && shift && exec "$@"`, "sh", base)
	if iso := field(t, report, "isolation"); !strings.HasPrefix(iso, "cgroup v2 at "+base+"/dsh-") {
		t.Fatalf("the helper's isolation: %s", iso)
	}
	for _, cmd := range []*exec.Cmd{a, b} {
		if !proctest.Gone(cmd.Process.Pid) {
			t.Errorf("pid %d of the dead harness still runs after New", cmd.Process.Pid)
		}
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead harness's cgroup %s is still there: %v", dead, err)
	}
	want := `level=WARN msg="subprocess: killed the commands that dead dsh instances left running" cgroups=2 instances=1`
	if logs := field(t, report, "logs"); !strings.Contains(logs, want) {
		t.Errorf("logs:\n%s\nwant %s", logs, want)
	}
	if proctest.Gone(c.Process.Pid) {
		t.Error("a command under a locked (live) harness directory was killed")
	}
}

// A descriptor the harness inherited without close-on-exec (`exec 7>>file; dsh …`)
// reaches no command; the harness itself keeps it.
func TestInheritedDescriptorsDoNotReachCommands(t *testing.T) {
	proctest.NoLeftovers(t)
	leak := filepath.Join(t.TempDir(), "leak")
	_, report := startHelper(t, "fds", "bash", "-c", `exec 7>>"$1"; shift; exec "$@"`, "bash", leak)
	if got := field(t, report, "inherited"); got != "true true" {
		t.Fatalf("the helper did not inherit fd 7 without close-on-exec: %s", got)
	}
	if got := field(t, report, "probe"); got != "no-fd-7" {
		t.Errorf("the command's write to fd 7: %q", got)
	}
	for _, fd := range strings.Fields(field(t, report, "fds")) {
		if strings.HasPrefix(fd, "7=") || strings.HasSuffix(fd, "="+leak) {
			t.Errorf("the command holds %s", fd)
		}
	}
	if got := field(t, report, "still-open"); got != "true" {
		t.Errorf("the harness lost its own fd 7")
	}
	if data, _ := os.ReadFile(leak); len(data) != 0 {
		t.Errorf("a command wrote through the inherited descriptor: %q", data)
	}
}
