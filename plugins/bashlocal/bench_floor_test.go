package bashlocal_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupFloor is the kernel's own cost of limits, the floor BenchmarkLimitsTrue/all and
// all-binding are read against: `bash -c true` started by os/exec from a thread that joins cgroup v1
// directories made like dsh's for the limits (a session directory with the session's
// limits, a command directory below it with the command's, in each hierarchy the
// limits use) for the fork, alternated with the same exec outside them. Nil where those hierarchies
// are not cgroup v1 ones the process can write.
type cgroupFloor struct {
	tasks, homes []int
	dirs         []string // to remove, deepest first
}

// floorLimits are the cgroup v1 files a floor writes: controller → {file, session
// value}, {file, command value}, a "" value written nowhere.
type floorLimits map[string][2][2]string

// Floors of allLimitsCfg (its CPU quotas cannot bind: dsh makes no cpu cgroup for
// them, and neither does the floor) and of bindingLimitsCfg (the session's quota
// written, the command's — no tighter — not).
var (
	allFloor = floorLimits{
		"memory": {{"memory.limit_in_bytes", "4294967296"}, {"memory.limit_in_bytes", "1073741824"}},
		"pids":   {{"pids.max", "4000"}, {"pids.max", "1000"}},
	}
	bindingFloor = floorLimits{
		"memory": allFloor["memory"],
		"pids":   allFloor["pids"],
		"cpu":    {{"cpu.cfs_quota_us", strconv.Itoa(int((hostCPUs - 0.5) * 100000))}, {"cpu.cfs_quota_us", ""}},
	}
)

func newCgroupFloor(b *testing.B, limits floorLimits) *cgroupFloor {
	own := v1Own(b)
	f := &cgroupFloor{}
	b.Cleanup(f.remove)
	for c, files := range limits {
		base, ok := own[c]
		if !ok {
			return nil
		}
		sess := filepath.Join(base, "dsh-bench-floor-"+strings.ReplaceAll(b.Name(), "/", "-"))
		cmd := filepath.Join(sess, "c1")
		for i, d := range []string{sess, cmd} {
			if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
				return nil
			}
			f.dirs = append([]string{d}, f.dirs...)
			if files[i][1] == "" {
				continue
			}
			if err := os.WriteFile(filepath.Join(d, files[i][0]), []byte(files[i][1]), 0); err != nil {
				b.Fatal(err)
			}
		}
		in, err1 := unix.Open(cmd+"/tasks", unix.O_WRONLY|unix.O_CLOEXEC, 0)
		home, err2 := unix.Open(base+"/tasks", unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err1 != nil || err2 != nil {
			b.Fatal(err1, err2)
		}
		f.tasks, f.homes = append(f.tasks, in), append(f.homes, home)
	}
	return f
}

// v1Own maps each cgroup v1 controller of this host to this process's directory in it.
func v1Own(b *testing.B) map[string]string {
	mounts := map[string]string{}
	mi, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		b.Fatal(err)
	}
	defer mi.Close()
	sc := bufio.NewScanner(mi)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, opts := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(opts) < 3 || opts[0] != "cgroup" {
			continue
		}
		for _, o := range strings.Split(opts[2], ",") {
			mounts[o] = fields[4]
		}
	}
	own := map[string]string{}
	data, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if m, ok := mounts[c]; ok {
				own[c] = filepath.Join(m, parts[2])
			}
		}
	}
	return own
}

// run times `bash -c true`, started by os/exec from a thread that joins the floor's
// cgroups around the fork (in), as dsh's own starts do, or not.
func (f *cgroupFloor) run(b *testing.B, in bool) time.Duration {
	t0 := time.Now()
	cmd := exec.Command("bash", "-c", "true")
	if in {
		runtime.LockOSThread()
		f.write(b, f.tasks)
	}
	err := cmd.Start()
	if in {
		f.write(b, f.homes)
		runtime.UnlockOSThread()
	}
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

// write moves the calling thread into the cgroups of tasks (their tasks files).
func (f *cgroupFloor) write(b *testing.B, tasks []int) {
	for _, fd := range tasks {
		if _, err := unix.Write(fd, []byte("0")); err != nil {
			b.Fatal(err)
		}
	}
}

func (f *cgroupFloor) remove() {
	for _, fd := range append(f.tasks, f.homes...) {
		unix.Close(fd)
	}
	for _, d := range f.dirs {
		_ = unix.Rmdir(d)
	}
}
