package subprocess

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-dev/dsh/proc"
)

// The controllers resource limits use: memory and pids bound a tree, cpu throttles it;
// cpuacct accounts CPU time where no cgroup v2 hierarchy does.
const (
	ctlMemory  = "memory"
	ctlPids    = "pids"
	ctlCPU     = "cpu"
	ctlCPUAcct = "cpuacct"
)

// cgroupMounts is where this process's cgroups are: its own cgroup in the cgroup v2
// hierarchy, and in each cgroup v1 hierarchy of a controller limits use.
type cgroupMounts struct {
	// v2 is the harness's own cgroup in the unified hierarchy ("" without one).
	v2 string
	// v1 maps a controller to the harness's own cgroup in that controller's v1
	// hierarchy.
	v1 map[string]string
}

// hostCgroupMounts reads /proc/self/cgroup and /proc/self/mountinfo.
func hostCgroupMounts() cgroupMounts {
	cg, _ := os.ReadFile("/proc/self/cgroup")
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	m := parseCgroupMounts(string(cg), string(mi))
	if dir, err := ownCgroup2Dir(); err == nil {
		m.v2 = dir
	}
	return m
}

// fakeCgroupMounts lays the hierarchies out under root as a hybrid host mounts them
// under /sys/fs/cgroup, each directory standing for the harness's own cgroup:
// root/unified (cgroup v2) and root/<controller> (cgroup v1). It is how tests point
// the probe at a host of their making (Options.CgroupRoot).
func fakeCgroupMounts(root string) cgroupMounts {
	m := cgroupMounts{v1: map[string]string{}}
	if fi, err := os.Stat(filepath.Join(root, "unified")); err == nil && fi.IsDir() {
		m.v2 = filepath.Join(root, "unified")
	}
	for _, c := range [...]string{ctlMemory, ctlPids, ctlCPU, ctlCPUAcct} {
		dir := filepath.Join(root, c)
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			m.v1[c] = dir
		}
	}
	return m
}

// parseCgroupMounts finds the harness's own cgroup in the v1 hierarchy of each
// controller limits use: /proc/self/cgroup names its path in the hierarchy
// ("4:memory:/a/b"), the hierarchy's cgroup entry of /proc/self/mountinfo where it is
// mounted (and which part of it: a mount of a subtree, as in a container).
func parseCgroupMounts(procCgroup, mountinfo string) cgroupMounts {
	m := cgroupMounts{v1: map[string]string{}}
	paths := map[string]string{} // controller → path in its hierarchy
	for _, line := range strings.Split(procCgroup, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			paths[c] = parts[2]
		}
	}
	for _, line := range strings.Split(mountinfo, "\n") {
		fields := strings.Fields(line)
		sep := slices.Index(fields, "-")
		if sep < 6 || sep+3 >= len(fields) || fields[sep+1] != "cgroup" {
			continue
		}
		root, mnt := unescapeMount(fields[3]), unescapeMount(fields[4])
		for _, opt := range strings.Split(fields[sep+3], ",") {
			rel, ok := paths[opt]
			if !ok || !slices.Contains([]string{ctlMemory, ctlPids, ctlCPU, ctlCPUAcct}, opt) {
				continue
			}
			if _, seen := m.v1[opt]; seen {
				continue
			}
			if root != "/" && rel != root && !strings.HasPrefix(rel, root+"/") {
				continue
			}
			m.v1[opt] = filepath.Join(mnt, strings.TrimPrefix(rel, root))
		}
	}
	return m
}

// enclosingLimits are the limits around the harness's own cgroup, which its commands
// share with it: the fewest processes still free under any pids limit of its cgroup
// or one above (0: none), and the smallest memory limit there (0: none).
type enclosingLimits struct {
	freePids    int64
	memory      int64
	pidsLimited bool
}

// readEnclosing reads the pids and memory limits of dir and of each cgroup above it
// (in the v1 or v2 files; above the hierarchy's mount point there are none).
func readEnclosing(dir string, v2 bool) enclosingLimits {
	var e enclosingLimits
	for d := dir; ; d = filepath.Dir(d) {
		{
			if limit, ok := readLimitFile(d + "/pids.max"); ok {
				cur, _ := readLimitFile(d + "/pids.current")
				free := limit - cur
				if !e.pidsLimited || free < e.freePids {
					e.freePids, e.pidsLimited = max(free, 0), true
				}
			}
		}
		{
			file := "/memory.limit_in_bytes"
			if v2 {
				file = "/memory.max"
			}
			if lim, ok := readLimitFile(d + file); ok && lim < unlimitedV1 && (e.memory == 0 || lim < e.memory) {
				e.memory = lim
			}
		}
		if d == "/" || d == "." {
			return e
		}
	}
}

// unlimitedV1 is where cgroup v1 memory limits mean none (the kernel shows
// 9223372036854771712, PAGE_COUNTER_MAX in bytes).
const unlimitedV1 = 1 << 62

// pidsReserve is how many processes the harness keeps for itself under a pids limit
// around it, out of free: enough to start the threads that kill a tree, read its
// output and answer, whatever its commands do.
func pidsReserve(free int64) int64 { return min(max(free/4, 16), 256) }

// onlineCPUs is how many CPUs are online (/sys/devices/system/cpu/online), read at
// most once a second; +Inf when it cannot be read (no quota is then taken for one
// that cannot bind).
func onlineCPUs() float64 {
	now := time.Now()
	if c := online.Load(); c != nil && now.Sub(c.at) < time.Second { // monotonic
		return c.n
	}
	n := math.Inf(1)
	if data, err := os.ReadFile("/sys/devices/system/cpu/online"); err == nil {
		if c, ok := parseCPUList(strings.TrimSpace(string(data))); ok {
			n = float64(c)
		}
	}
	online.Store(&onlineCount{n: n, at: now})
	return n
}

type onlineCount struct {
	n  float64
	at time.Time // when it was read
}

var online atomic.Pointer[onlineCount]

// parseCPUList counts the CPUs of a kernel CPU list ("0-3,8,10-11").
func parseCPUList(s string) (int, bool) {
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b, err2 := a, error(nil)
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || b < a {
			return 0, false
		}
		n += b - a + 1
	}
	return n, n > 0
}

// hostMounts are this process's cgroup mounts, read once.
var hostMounts = sync.OnceValue(hostCgroupMounts)

// CheckHostLimits tells, without changing anything, whether this host can enforce the
// limits r sets: nil when each one's controller is there (offered by the cgroup v2
// hierarchy, or mounted as a cgroup v1 one), else a *LimitError naming the first that
// is not. A host that passes may still refuse (a hierarchy that is not writable):
// Supervisor.CheckLimits tells for sure. It is what a configuration's validation (and
// `dsh check`) can tell.
func CheckHostLimits(r proc.ResourceLimits) error {
	m := hostMounts()
	for _, k := range keyControllers {
		if !k.set(r) || m.v1[k.ctl] != "" {
			continue
		}
		why := "no cgroup2 mount"
		if m.v2 != "" {
			offered := controllerList(m.v2 + "/cgroup.controllers")
			if slices.Contains(offered, k.ctl) {
				continue
			}
			why = fmt.Sprintf("cgroup v2 at %s does not offer it (its cgroup.controllers: %q)", m.v2, strings.Join(offered, " "))
		}
		return &LimitError{Key: k.key, Why: "no " + k.ctl + " controller: " + why + ", and no cgroup v1 " + k.ctl + " hierarchy is mounted"}
	}
	return nil
}
