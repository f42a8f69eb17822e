package subprocess

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/proc"
)

// The files each hierarchy's version is written in, checked on a fake cgroup tree: a
// directory laid out as a host mounts its hierarchies, whose "kernel" (fakeKernel)
// fills each new cgroup directory with the controllers' files. The v1 path also runs
// for real on hosts with v1 hierarchies (TestLimitsV1…); the v2 path where cgroup v2
// delegates the controllers (TestLimitsV2EndToEnd).

// fakeKernel creates, in each cgroup directory made, the files of both versions.
func fakeKernel(t *testing.T) {
	t.Helper()
	prev := cgroupMkdirHook
	cgroupMkdirHook = func(dir string) {
		for name, content := range map[string]string{
			// cgroup v2
			"cgroup.events": "populated 0\nfrozen 0\n", "cgroup.subtree_control": "", "cgroup.controllers": "memory pids cpu",
			"cgroup.procs": "", "cgroup.kill": "", "memory.max": "max\n", "memory.swap.max": "max\n", "memory.peak": "0\n",
			"memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n", "cpu.max": "max 100000\n", "cpu.stat": "usage_usec 0\n",
			// both
			"pids.max": "max\n", "pids.events": "max 0\n", "pids.peak": "0\n", "pids.current": "0\n",
			// cgroup v1
			"tasks": "", "memory.limit_in_bytes": "9223372036854771712\n", "memory.memsw.limit_in_bytes": "9223372036854771712\n",
			"memory.max_usage_in_bytes": "0\n", "memory.failcnt": "0\n", "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
			"cpu.cfs_period_us": "100000\n", "cpu.cfs_quota_us": "-1\n", "cpuacct.usage": "0\n",
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(func() { cgroupMkdirHook = prev })
}

// fakeHost makes root/<h> for each hierarchy h ("unified" for cgroup v2), each with the
// files of a harness's own cgroup, plus files (name → content) in some.
func fakeHost(t *testing.T, hierarchies []string, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for _, h := range hierarchies {
		dir := filepath.Join(root, h)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cgroupMkdirHook(dir)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// expectFiles checks the content of files below dir.
func expectFiles(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	for name, content := range want {
		if got := read(t, filepath.Join(dir, name)); got != content {
			t.Errorf("%s/%s = %q, want %q", dir, name, got, content)
		}
	}
}

var allLimits = proc.ResourceLimits{Memory: 64 << 20, Processes: 50, CPUs: 1.5, SessionMemory: 1 << 30, SessionProcesses: 200, SessionCPUs: 2}

// cgroup v2, where the harness's cgroup delegates memory, pids and cpu: the session's
// and the command's limits in memory.max (swap off), pids.max and cpu.max; the command
// in a cgroup v2 directory of its own below its session's; its usage and the limits it
// reached read from memory.events, memory.peak, pids.events and cpu.stat.
func TestLimitsV2Files(t *testing.T) {
	fakeKernel(t)
	root := fakeHost(t, []string{"unified"}, map[string]string{"unified/cgroup.subtree_control": "memory pids"})
	b := newBudgets(quiet(), fakeCgroupMounts(root), true, "", nil, nil)
	t.Cleanup(b.close)
	if err := b.check(allLimits); err != nil {
		t.Fatal(err)
	}
	if m := b.mechanism(allLimits); m != "cgroup v2 (memory, pids, cpu)" {
		t.Errorf("mechanism %q", m)
	}
	// cpu was offered, not delegated: the harness delegated it.
	if got := read(t, root+"/unified/cgroup.subtree_control"); got != "+cpu" {
		t.Errorf("own cgroup.subtree_control got %q, want +cpu written", got)
	}
	inst := filepath.Join(root, "unified", b.name)
	bc, err := b.place("s1", allLimits, true)
	if err != nil {
		t.Fatal(err)
	}
	if bc.v2 == nil || bc.v2.path != inst+"/s-s1/c1" || len(bc.tasks) != 0 {
		t.Fatalf("the command's cgroups: v2 %v, v1 tasks %d", bc.v2, len(bc.tasks))
	}
	expectFiles(t, inst, map[string]string{
		"cgroup.subtree_control":      "+cpu", // each controller enabled as it was first used
		"s-s1/cgroup.subtree_control": "+memory +pids +cpu",
		"s-s1/memory.max":             "1073741824",
		"s-s1/memory.swap.max":        "0",
		"s-s1/pids.max":               "200",
		"s-s1/cpu.max":                "200000 100000",
		"s-s1/c1/memory.max":          "67108864",
		"s-s1/c1/memory.swap.max":     "0",
		"s-s1/c1/pids.max":            "50",
		"s-s1/c1/cpu.max":             "150000 100000",
	})
	// The command reached its own memory and process limits.
	cmd := inst + "/s-s1/c1/"
	write(t, cmd+"memory.events", "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n")
	write(t, cmd+"memory.peak", "67100000\n")
	write(t, cmd+"cpu.stat", "usage_usec 2500000\nuser_usec 2000000\n")
	write(t, cmd+"pids.events", "max 3\n")
	write(t, cmd+"pids.peak", "50\n")
	got := bc.account(bc.v2, false)
	want := proc.Budget{CPUMs: 2500, PeakMemoryBytes: 67100000, Hits: []proc.LimitHit{{Limit: proc.LimitMemory, Size: 64 << 20}, {Limit: proc.LimitProcesses, Size: 50}}}
	if !sameBudget(got, want) {
		t.Errorf("budget %+v, want %+v", *got, want)
	}
	// A second command: its session's limits stopped it (v2 counts a refusal at the
	// cgroup whose limit refused it).
	bc8, err := b.place("s1", allLimits, true)
	if err != nil {
		t.Fatal(err)
	}
	sess := inst + "/s-s1/"
	c8 := bc8.v2.path + "/"
	write(t, sess+"memory.events", "max 4\noom 1\noom_kill 1\n")
	write(t, sess+"pids.events", "max 1\n")
	write(t, sess+"pids.peak", "200\n")
	write(t, c8+"memory.events", "max 0\noom 0\noom_kill 1\n")
	write(t, c8+"pids.peak", "12\n")
	got = bc8.account(bc8.v2, false)
	want = proc.Budget{CPUMs: 0, PeakMemoryBytes: 0, Hits: []proc.LimitHit{{Limit: proc.LimitSessionMemory, Size: 1 << 30}, {Limit: proc.LimitSessionProcesses, Size: 200}}}
	if !sameBudget(got, want) {
		t.Errorf("budget %+v, want %+v", *got, want)
	}
}

// cgroup v1: a hierarchy per controller (memory, pids, cpu, cpuacct), the limits in
// memory.limit_in_bytes and memory.memsw.limit_in_bytes, pids.max, cpu.cfs_quota_us;
// the leader joins the command's directories through their tasks files; its usage and
// limits reached read from memory.oom_control, memory.failcnt,
// memory.max_usage_in_bytes, pids.events, pids.peak and cpuacct.usage.
func TestLimitsV1Files(t *testing.T) {
	fakeKernel(t)
	root := fakeHost(t, []string{"memory", "pids", "cpu", "cpuacct"}, nil)
	b := newBudgets(quiet(), fakeCgroupMounts(root), true, "", nil, nil)
	t.Cleanup(b.close)
	if m := b.mechanism(allLimits); m != "cgroup v1 (memory, pids, cpu)" {
		t.Errorf("mechanism %q", m)
	}
	bc, err := b.place("s1", allLimits, false)
	if err != nil {
		t.Fatal(err)
	}
	defer bc.closeFiles()
	if bc.v2 != nil || len(bc.tasks) != 4 || len(bc.homes) != 4 {
		t.Fatalf("v2 %v, %d tasks files, %d homes; want the 4 v1 hierarchies (cpuacct accounting without cgroup v2)", bc.v2, len(bc.tasks), len(bc.homes))
	}
	for i, c := range []string{"memory", "pids", "cpu", "cpuacct"} {
		inst := filepath.Join(root, c, b.name)
		if bc.tasks[i].Name() != inst+"/s-s1/c1/tasks" || bc.homes[i].Name() != filepath.Join(root, c, "tasks") {
			t.Errorf("%s: tasks %s, home %s", c, bc.tasks[i].Name(), bc.homes[i].Name())
		}
	}
	expectFiles(t, root, map[string]string{
		"memory/" + b.name + "/s-s1/memory.limit_in_bytes":          "1073741824",
		"memory/" + b.name + "/s-s1/memory.memsw.limit_in_bytes":    "1073741824",
		"memory/" + b.name + "/s-s1/c1/memory.limit_in_bytes":       "67108864",
		"memory/" + b.name + "/s-s1/c1/memory.memsw.limit_in_bytes": "67108864",
		"pids/" + b.name + "/s-s1/pids.max":                         "200",
		"pids/" + b.name + "/s-s1/c1/pids.max":                      "50",
		"cpu/" + b.name + "/s-s1/cpu.cfs_quota_us":                  "200000",
		"cpu/" + b.name + "/s-s1/c1/cpu.cfs_period_us":              "100000",
		"cpu/" + b.name + "/s-s1/c1/cpu.cfs_quota_us":               "150000",
	})
	mem := filepath.Join(root, "memory", b.name, "s-s1")
	pids := filepath.Join(root, "pids", b.name, "s-s1")
	write(t, mem+"/c1/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
	write(t, mem+"/c1/memory.failcnt", "31\n")
	write(t, mem+"/c1/memory.max_usage_in_bytes", "67108864\n")
	write(t, pids+"/c1/pids.events", "max 5\n")
	write(t, pids+"/c1/pids.peak", "50\n")
	write(t, filepath.Join(root, "cpuacct", b.name, "s-s1/c1/cpuacct.usage"), "1500000000\n")
	got := bc.account(nil, false)
	want := proc.Budget{CPUMs: 1500, PeakMemoryBytes: 64 << 20, Hits: []proc.LimitHit{{Limit: proc.LimitMemory, Size: 64 << 20}, {Limit: proc.LimitProcesses, Size: 50}}}
	if !sameBudget(got, want) {
		t.Errorf("budget %+v, want %+v", *got, want)
	}
	// v1 counts a refused fork in the forking cgroup, whatever limit refused it: the
	// one that was reached (the session's, its peak at its limit) is named.
	bc8, err := b.place("s1", allLimits, false)
	if err != nil {
		t.Fatal(err)
	}
	defer bc8.closeFiles()
	c8 := filepath.Base(filepath.Dir(bc8.tasks[0].Name()))
	write(t, mem+"/memory.failcnt", "7\n") // the session's limit stopped allocations
	write(t, mem+"/"+c8+"/memory.oom_control", "oom_kill 1\n")
	write(t, pids+"/pids.peak", "200\n")
	write(t, pids+"/"+c8+"/pids.events", "max 1\n")
	write(t, pids+"/"+c8+"/pids.peak", "9\n")
	got = bc8.account(nil, false)
	want = proc.Budget{CPUMs: 0, PeakMemoryBytes: 0, Hits: []proc.LimitHit{{Limit: proc.LimitSessionMemory, Size: 1 << 30}, {Limit: proc.LimitSessionProcesses, Size: 200}}}
	if !sameBudget(got, want) {
		t.Errorf("budget %+v, want %+v", *got, want)
	}
	// Lifting the session's limits (a reload) writes "no limit".
	if _, err := b.place("s1", proc.ResourceLimits{Memory: 64 << 20}, false); err != nil {
		t.Fatal(err)
	}
	expectFiles(t, root, map[string]string{
		"memory/" + b.name + "/s-s1/memory.limit_in_bytes": "-1",
		"pids/" + b.name + "/s-s1/pids.max":                "max",
		"cpu/" + b.name + "/s-s1/cpu.cfs_quota_us":         "-1",
	})
}

// Under limits around the harness, every command is placed: in a pids cgroup whose
// limit leaves the harness its reserve, and in a memory cgroup whose OOM kills are
// told with the limit around the harness.
func TestLimitsEnclosing(t *testing.T) {
	fakeKernel(t)
	root := fakeHost(t, []string{"memory", "pids"}, map[string]string{
		"pids/pids.max": "100\n", "pids/pids.current": "20\n", "memory/memory.limit_in_bytes": "134217728\n",
	})
	b := newBudgets(quiet(), fakeCgroupMounts(root), true, "", nil, nil)
	t.Cleanup(b.close)
	if got := read(t, filepath.Join(root, "pids", b.name, "pids.max")); got != "60" {
		t.Fatalf("the instance's pids.max %s, want 60 (80 free, 20 kept)", got)
	}
	bc, err := b.place("", proc.ResourceLimits{}, true)
	if err != nil || bc == nil {
		t.Fatalf("a command without limits is not placed: %v %v", bc, err)
	}
	defer bc.closeFiles()
	dir := filepath.Join(b.name, "no-session", "c1")
	write(t, filepath.Join(root, "memory", dir, "memory.oom_control"), "oom_kill 1\n")
	write(t, filepath.Join(root, "pids", dir, "pids.events"), "max 2\n")
	got := bc.account(nil, false)
	want := proc.Budget{CPUMs: -1, PeakMemoryBytes: 0, Hits: []proc.LimitHit{{Limit: proc.LimitMemory, Size: 128 << 20}, {Limit: proc.LimitProcesses, Size: 60}}}
	if !sameBudget(got, want) {
		t.Errorf("budget %+v, want %+v", *got, want)
	}
}

// A limit without its controller, and each hierarchy's reason.
func TestLimitsCheck(t *testing.T) {
	fakeKernel(t)
	root := fakeHost(t, []string{"unified", "memory"}, map[string]string{"unified/cgroup.controllers": "io"})
	b := newBudgets(quiet(), fakeCgroupMounts(root), true, "", nil, nil)
	t.Cleanup(b.close)
	if err := b.check(proc.ResourceLimits{Memory: 1 << 30}); err != nil {
		t.Errorf("memory (v1): %v", err)
	}
	err := b.check(proc.ResourceLimits{Memory: 1 << 30, SessionCPUs: 2})
	want := `limits.sessionCpus cannot be enforced on this host: no cpu controller: cgroup v2 at ` + root + `/unified does not delegate it (its cgroup.controllers: "io"), and no cgroup v1 cpu hierarchy is mounted`
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
	if m := b.mechanism(proc.ResourceLimits{Memory: 1 << 30, SessionCPUs: 2}); m != "cgroup v1 (memory)" {
		t.Errorf("mechanism %q", m)
	}
}

func sameBudget(got *proc.Budget, want proc.Budget) bool {
	if got == nil || got.CPUMs != want.CPUMs || got.PeakMemoryBytes != want.PeakMemoryBytes || len(got.Hits) != len(want.Hits) {
		return false
	}
	for i := range want.Hits {
		if got.Hits[i] != want.Hits[i] {
			return false
		}
	}
	return true
}

// The harness's own cgroups, found from /proc/self/cgroup and /proc/self/mountinfo: a
// hybrid host's v1 hierarchies (one co-mounted), and a container's, whose mounts show
// a subtree of the hierarchy.
func TestParseCgroupMounts(t *testing.T) {
	procCgroup := "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/8f72\n2:cpu,cpuacct:/a/b\n0::/\n"
	mountinfo := strings.Join([]string{
		"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755",
		"32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct",
		"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory",
		"39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids",
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw",
	}, "\n")
	m := parseCgroupMounts(procCgroup, mountinfo)
	want := map[string]string{"memory": "/sys/fs/cgroup/memory/process_api/8f72", "pids": "/sys/fs/cgroup/pids",
		"cpu": "/sys/fs/cgroup/cpu,cpuacct/a/b", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct/a/b"}
	if len(m.v1) != len(want) {
		t.Errorf("v1 %v, want %v", m.v1, want)
	}
	for c, dir := range want {
		if m.v1[c] != dir {
			t.Errorf("%s: %q, want %q", c, m.v1[c], dir)
		}
	}
	// In a container the mount is the container's subtree (root /docker/abc).
	m = parseCgroupMounts("5:memory:/docker/abc/sub\n", "40 31 0:32 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n")
	if m.v1["memory"] != "/sys/fs/cgroup/memory/sub" {
		t.Errorf("a subtree mount: %q", m.v1["memory"])
	}
	// A mount of another subtree is not where this process is.
	if m := parseCgroupMounts("5:memory:/x\n", "40 31 0:32 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"); m.v1["memory"] != "" {
		t.Errorf("another subtree: %q", m.v1["memory"])
	}
}

// Where the harness's cgroup v2 directory offers a controller but holds the harness
// (the kernel refuses controllers to the children of a cgroup with processes), the
// harness moves itself and its watchdog into a leaf of their own, then delegates; with
// any other process there, it refuses, saying why.
func TestLimitsV2LeavesItsOwnCgroup(t *testing.T) {
	fakeKernel(t)
	// The fake kernel: a cgroup holds processes until a leaf of the harness's exists.
	v2EnableFault = func(dir string) error {
		if leaves, _ := filepath.Glob(dir + "/dsh-*-harness"); len(leaves) == 0 && strings.HasSuffix(dir, "/unified") {
			return unix.EBUSY
		}
		return nil
	}
	t.Cleanup(func() { v2EnableFault = nil })
	own := strconv.Itoa(os.Getpid())
	root := fakeHost(t, []string{"unified"}, map[string]string{"unified/cgroup.procs": own + "\n4242\n"})
	b := newBudgets(quiet(), fakeCgroupMounts(root), true, "", nil, func() []int { return []int{4242} })
	t.Cleanup(b.close)
	if err := b.check(proc.ResourceLimits{Memory: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	leaf := filepath.Join(root, "unified", b.name+"-harness")
	if got := read(t, leaf+"/cgroup.procs"); got != "4242" { // the last pid written
		t.Errorf("the leaf's cgroup.procs %q", got)
	}
	// Another process in the cgroup: refused.
	root = fakeHost(t, []string{"unified"}, map[string]string{"unified/cgroup.procs": own + "\n777\n"})
	b = newBudgets(quiet(), fakeCgroupMounts(root), true, "", nil, func() []int { return []int{4242} })
	t.Cleanup(b.close)
	err := b.check(proc.ResourceLimits{Memory: 1 << 30})
	if err == nil || !strings.Contains(err.Error(), "offers it but cannot delegate it: its cgroup holds processes other than the harness's (pid 777)") {
		t.Errorf("with another process: %v", err)
	}
}

// A command's CPU quota no tighter than its session's is not written (the session's
// enforces it): in cgroup v1 and v2.
func TestLimitsImpliedCPUQuotaNotWritten(t *testing.T) {
	fakeKernel(t)
	r := proc.ResourceLimits{CPUs: 2, SessionCPUs: 2}
	for name, files := range map[string][2]string{
		"v1": {"cpu/%s/s-s1/c1/cpu.cfs_quota_us", "-1"},
		"v2": {"unified/%s/s-s1/c1/cpu.max", "max 100000"},
	} {
		t.Run(name, func(t *testing.T) {
			mounts, extra := []string{"cpu", "cpuacct"}, map[string]string(nil)
			if name == "v2" {
				mounts, extra = []string{"unified"}, map[string]string{"unified/cgroup.subtree_control": "cpu"}
			}
			root := fakeHost(t, mounts, extra)
			b := newBudgets(quiet(), fakeCgroupMounts(root), true, "", nil, nil)
			t.Cleanup(b.close)
			bc, err := b.place("s1", r, name == "v2")
			if err != nil || bc == nil {
				t.Fatalf("place: %v, %v", bc, err)
			}
			defer bc.closeFiles()
			expectFiles(t, root, map[string]string{fmt.Sprintf(files[0], b.name): files[1]})
		})
	}
}

// A CPU quota of at least the CPUs online cannot bind, so none is written and, with no
// other quota, the command gets no cpu cgroup at all (its CPU time is still accounted,
// in cpuacct); a tighter one is written as before. In cgroup v1 and v2.
func TestLimitsCPUQuotaThatCannotBindNotWritten(t *testing.T) {
	fakeKernel(t)
	for _, v2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "v1", true: "v2"}[v2], func(t *testing.T) {
			mounts, extra := []string{"cpu", "cpuacct"}, map[string]string(nil)
			if v2 {
				mounts, extra = []string{"unified"}, map[string]string{"unified/cgroup.subtree_control": "cpu"}
			}
			root := fakeHost(t, mounts, extra)
			b := newBudgets(quiet(), fakeCgroupMounts(root), true, "", nil, nil)
			t.Cleanup(b.close)
			b.cpus = func() float64 { return 2 }
			inst := func(h string) string { return filepath.Join(root, h, b.name) }

			bc, err := b.place("s1", proc.ResourceLimits{CPUs: 2, SessionCPUs: 4}, v2)
			if err != nil {
				t.Fatal(err)
			}
			if v2 {
				if bc != nil {
					defer bc.closeFiles()
				}
				for _, f := range []string{"/s-s1/cpu.max", "/s-s1/c1/cpu.max"} {
					if data, err := os.ReadFile(inst("unified") + f); err == nil && strings.TrimSpace(string(data)) != "max 100000" {
						t.Errorf("%s = %q for quotas of 2 and 4 CPUs on a host of 2", f, data)
					}
				}
			} else {
				if bc == nil {
					t.Fatal("no cgroups: the command's CPU time is not accounted")
				}
				defer bc.closeFiles()
				if _, err := os.Stat(inst("cpu")); err == nil {
					t.Errorf("a cpu cgroup was made for quotas of 2 and 4 CPUs on a host of 2")
				}
				if _, err := os.Stat(inst("cpuacct") + "/s-s1/c1"); err != nil {
					t.Errorf("the command is not in cpuacct: %v", err)
				}
			}

			bc2, err := b.place("s2", proc.ResourceLimits{CPUs: 1.5, SessionCPUs: 2}, v2)
			if err != nil || bc2 == nil {
				t.Fatalf("place: %v, %v", bc2, err)
			}
			defer bc2.closeFiles()
			if v2 {
				expectFiles(t, inst("unified"), map[string]string{"s-s2/cpu.max": "max 100000", "s-s2/c2/cpu.max": "150000 100000"})
			} else {
				expectFiles(t, inst("cpu"), map[string]string{"s-s2/cpu.cfs_quota_us": "-1", "s-s2/c2/cpu.cfs_quota_us": "150000"})
			}
		})
	}
}

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string]int{"0": 1, "0-1": 2, "0-3,8,10-11": 7, "": 0, "x": 0, "3-1": 0, "0-": 0} {
		if n, ok := parseCPUList(in); n != want || ok != (want > 0) {
			t.Errorf("parseCPUList(%q) = %d, %v; want %d", in, n, ok, want)
		}
	}
}

func TestParseKeyed(t *testing.T) {
	oom := "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"
	for _, c := range []struct {
		text, key string
		n         int64
		ok        bool
	}{
		{oom, "oom_kill", 3, true},
		{oom, "under_oom", 0, true},
		{"max 7", "max", 7, true}, // no final newline
		{oom, "oom", 0, false},
		{"", "max", 0, false},
		{"max x\n", "max", 0, false},
	} {
		if n, ok := parseKeyed([]byte(c.text), true, c.key); n != c.n || ok != c.ok {
			t.Errorf("parseKeyed(%q, %q) = %d, %v; want %d, %v", c.text, c.key, n, ok, c.n, c.ok)
		}
	}
}

// PrepareLimits's make: a session's first command is placed in the cgroups made ahead
// (no directory is made on its way), and one ready already is not made again.
func TestLimitsPreparedCgroupsServeTheFirstCommand(t *testing.T) {
	fakeKernel(t)
	root := fakeHost(t, []string{"memory", "pids"}, nil)
	b := newBudgets(quiet(), fakeCgroupMounts(root), true, "", nil, nil)
	t.Cleanup(b.close)
	r := proc.ResourceLimits{Memory: 64 << 20, Processes: 50, SessionProcesses: 200}
	b.prepare("s1", r, false)
	b.prepare("s1", r, false) // one is ready: nothing more is made
	sess := filepath.Join(root, "pids", b.name, proc.OwnerDirName("s1"))
	if _, err := os.Stat(sess + "/c1"); err != nil {
		t.Fatalf("the prepared command cgroup: %v", err)
	}
	if _, err := os.Stat(sess + "/c2"); err == nil {
		t.Fatal("a second cgroup was made while one was ready")
	}
	bc, err := b.place("s1", r, false)
	if err != nil || bc == nil {
		t.Fatalf("place: %v, %v", bc, err)
	}
	defer bc.closeFiles()
	if d, ok := bc.dir(ctlPids); !ok || d.dir.path != sess+"/c1" {
		t.Errorf("the first command is in %v, not the prepared c1", d.dir.path)
	}
	if _, err := os.Stat(sess + "/c2"); err == nil {
		t.Error("the first command's place made a cgroup")
	}
	b.close()
	b.prepare("s2", r, false) // after the close: nothing
	if _, err := os.Stat(filepath.Join(root, "pids", b.name, proc.OwnerDirName("s2"))); err == nil {
		t.Error("cgroups made after the close")
	}
}

// A prepare during which a session ended keeps nothing: its own (ended as its command
// cgroup was made), or any other (the ended one may have been its own, ended before
// anything was made, which then made afresh), and nothing holds the session's
// directories.
func TestLimitsPreparedForASessionThatEndedAreDiscarded(t *testing.T) {
	fakeKernel(t)
	r := proc.ResourceLimits{Processes: 50, SessionProcesses: 200}
	for _, ending := range []string{"s1", "s2"} {
		root := fakeHost(t, []string{"pids"}, nil)
		b := newBudgets(quiet(), fakeCgroupMounts(root), true, "", nil, nil)
		t.Cleanup(b.close)
		sess := filepath.Join(root, "pids", b.name, proc.OwnerDirName("s1"))
		kernel := cgroupMkdirHook
		cgroupMkdirHook = func(dir string) {
			kernel(dir)
			if dir == sess+"/c1" {
				b.endSession(ending) // a session ends while s1's command cgroup is made
			}
		}
		b.prepare("s1", r, false)
		cgroupMkdirHook = kernel
		b.mu.Lock()
		spares := len(b.spares)
		left := b.sessions[proc.OwnerDirName("s1")]
		b.mu.Unlock()
		if spares != 0 {
			t.Errorf("%s ended during the prepare: %d kinds of spares kept", ending, spares)
		}
		// (The fake kernel's directories hold files, which rmdir refuses: what is
		// checked is that nothing holds the session any more.)
		if left != nil && left.live != 0 {
			t.Errorf("%s ended during the prepare: s1 still holds %d command cgroups", ending, left.live)
		}
	}
}

// A CPU quota that cannot bind, where nothing else would give the command a cgroup
// (cgroup v2 delegating cpu, no memory controller anywhere), is written all the same:
// the command's usage is accounted in its cgroup.
func TestLimitsCPUQuotaThatCannotBindStillAccounts(t *testing.T) {
	fakeKernel(t)
	root := fakeHost(t, []string{"unified"}, map[string]string{"unified/cgroup.subtree_control": "cpu", "unified/cgroup.controllers": "cpu"})
	b := newBudgets(quiet(), fakeCgroupMounts(root), true, "", nil, nil)
	t.Cleanup(b.close)
	b.cpus = func() float64 { return 2 }
	bc, err := b.place("s1", proc.ResourceLimits{CPUs: 2}, true)
	if err != nil || bc == nil || bc.v2 == nil {
		t.Fatalf("place: %v, %v: the command has no cgroup to account its usage in", bc, err)
	}
	defer bc.closeFiles()
	expectFiles(t, filepath.Join(root, "unified", b.name), map[string]string{"s-s1/c1/cpu.max": "200000 100000"})
}
