package subprocess

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// cgDir is one cgroup directory, read and written in the files of its hierarchy's
// version: cgroup v1 (memory.limit_in_bytes, pids.max, cpu.cfs_quota_us…) or v2
// (memory.max, pids.max, cpu.max…).
type cgDir struct {
	path string
	v2   bool
	// open are control files kept open to be re-read (keep); nil for none.
	open map[string]int
}

// cpuPeriodUs is the period of a CPU quota: cpus × this many µs of CPU time per period.
const cpuPeriodUs = 100000

// setMemory limits the memory of the cgroup (and its descendants) to n bytes, swap
// included where the kernel accounts it: no swapping past the limit either.
func (d cgDir) setMemory(n int64) error {
	v := strconv.FormatInt(n, 10)
	if d.v2 {
		if err := d.write("memory.max", v); err != nil {
			return err
		}
		if err := d.write("memory.swap.max", "0"); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
		return nil
	}
	// memory.memsw.limit_in_bytes (memory and swap) is never below the memory limit:
	// raising goes memsw first, lowering memory first.
	err := d.write("memory.limit_in_bytes", v)
	if errors.Is(err, unix.EINVAL) {
		if err := d.write("memory.memsw.limit_in_bytes", v); err != nil {
			return err
		}
		err = d.write("memory.limit_in_bytes", v)
	}
	if err != nil {
		return err
	}
	if err := d.write("memory.memsw.limit_in_bytes", v); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

// setPids limits the cgroup (and its descendants) to n processes and threads.
func (d cgDir) setPids(n int64) error { return d.write("pids.max", strconv.FormatInt(n, 10)) }

// setCPUs gives the cgroup (and its descendants) a quota of cpus CPUs.
func (d cgDir) setCPUs(cpus float64) error {
	quota := strconv.FormatInt(int64(math.Round(cpus*cpuPeriodUs)), 10)
	if d.v2 {
		return d.write("cpu.max", quota+" "+strconv.Itoa(cpuPeriodUs))
	}
	if err := d.write("cpu.cfs_period_us", strconv.Itoa(cpuPeriodUs)); err != nil {
		return err
	}
	return d.write("cpu.cfs_quota_us", quota)
}

// setMemoryOrNone is setMemory, or lifts the limit for n == 0.
func (d cgDir) setMemoryOrNone(n int64) error {
	if n > 0 {
		return d.setMemory(n)
	}
	if d.v2 {
		return d.write("memory.max", "max")
	}
	if err := d.write("memory.memsw.limit_in_bytes", "-1"); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return d.write("memory.limit_in_bytes", "-1")
}

// setPidsOrNone is setPids, or lifts the limit for n == 0.
func (d cgDir) setPidsOrNone(n int64) error {
	if n > 0 {
		return d.setPids(n)
	}
	return d.write("pids.max", "max")
}

// setCPUsOrNone is setCPUs, or lifts the quota for cpus == 0.
func (d cgDir) setCPUsOrNone(cpus float64) error {
	if cpus > 0 {
		return d.setCPUs(cpus)
	}
	if d.v2 {
		return d.write("cpu.max", "max "+strconv.Itoa(cpuPeriodUs))
	}
	return d.write("cpu.cfs_quota_us", "-1")
}

// enable makes controllers available to the cgroup's children (cgroup v2's
// cgroup.subtree_control; a v1 hierarchy has its controllers everywhere).
func (d cgDir) enable(controllers []string) error {
	if !d.v2 || len(controllers) == 0 {
		return nil
	}
	return d.write("cgroup.subtree_control", "+"+strings.Join(controllers, " +"))
}

// The counters a command's cgroup is read for when it settles. Its directory keeps
// them open (keep), so that reading them then is a pread each.

// memoryStats is what the memory controller tells of a cgroup.
type memoryStats struct {
	// peak is the most memory it used at once (-1: unknown).
	peak int64
	// oomKills counts the processes of it the OOM killer killed.
	oomKills int64
}

func (d cgDir) memoryStats() memoryStats {
	s := memoryStats{peak: -1, oomKills: d.oomKills()}
	peak := "memory.max_usage_in_bytes"
	if d.v2 {
		peak = "memory.peak"
	}
	if n, ok := d.number(peak); ok {
		s.peak = n
	}
	return s
}

// oomKills counts the processes of the cgroup the OOM killer killed.
func (d cgDir) oomKills() int64 {
	if d.v2 {
		n, _ := d.keyed("memory.events", "oom_kill")
		return n
	}
	n, _ := d.keyed("memory.oom_control", "oom_kill")
	return n
}

// memoryFailures counts the times the cgroup's own limit (in v2, or one below it)
// stopped an allocation.
func (d cgDir) memoryFailures() int64 {
	if d.v2 {
		n, _ := d.keyed("memory.events", "max")
		return n
	}
	n, _ := d.number("memory.failcnt")
	return n
}

// pidsRefused counts forks refused (v1: forks of its processes; v2: forks its limit,
// or one below it, refused).
func (d cgDir) pidsRefused() int64 {
	n, _ := d.keyed("pids.events", "max")
	return n
}

// pidsPeak is the most processes the cgroup held (-1: unknown).
func (d cgDir) pidsPeak() int64 {
	if n, ok := d.number("pids.peak"); ok {
		return n
	}
	return -1
}

// cpuMs is the CPU time the cgroup's processes used, in milliseconds: cgroup v2's
// cpu.stat (there in every v2 cgroup, with or without the cpu controller), or the v1
// cpuacct controller's cpuacct.usage.
func (d cgDir) cpuMs() (int64, bool) {
	if d.v2 {
		var buf [smallFile]byte
		return cpuStatMs(d.read("cpu.stat", buf[:]))
	}
	ns, ok := d.number("cpuacct.usage")
	return ns / 1e6, ok
}

// cpuStatMs is the CPU time in a cgroup v2 cpu.stat b, in milliseconds.
func cpuStatMs(b []byte, ok bool) (int64, bool) {
	us, ok := parseKeyed(b, ok, "usage_usec")
	return us / 1000, ok
}

// reset readies an emptied command cgroup for reuse: its peak and failure counts are
// reset (cgroup v1 allows it), and nothing may still be charged to it. It reports
// whether the cgroup can be reused.
func (d cgDir) reset(ctls []string) bool {
	if d.v2 {
		return false
	}
	for _, c := range ctls {
		switch c {
		case ctlMemory:
			if n, ok := d.number("memory.usage_in_bytes"); !ok || n > maxLeftover {
				return false
			}
			if d.write("memory.max_usage_in_bytes", "0") != nil || d.write("memory.failcnt", "0") != nil {
				return false
			}
		case ctlCPUAcct:
			if d.write("cpuacct.usage", "0") != nil {
				return false
			}
		}
	}
	return true
}

// countersOf are the files read when a command of the controllers ctls settles.
func countersOf(v2 bool, ctls []string) []string {
	var files []string
	for _, c := range ctls {
		switch {
		case c == ctlMemory && v2:
			files = append(files, "memory.events", "memory.peak")
		case c == ctlMemory:
			// usage_in_bytes and failcnt are also what reset reads and writes.
			files = append(files, "memory.oom_control", "memory.max_usage_in_bytes", "memory.usage_in_bytes", "memory.failcnt")
		case c == ctlPids:
			files = append(files, "pids.events")
		case c == ctlCPUAcct:
			files = append(files, "cpuacct.usage")
		}
	}
	if v2 {
		files = append(files, "cpu.stat")
	}
	return files
}

// keep opens files of d, to be read with a pread each and written (reset) with a
// pwrite (an open of a control file costs more than its read); files it cannot open
// are read and written by path.
func (d *cgDir) keep(files []string) {
	for _, f := range files {
		fd, err := unix.Open(d.path+"/"+f, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			fd, err = unix.Open(d.path+"/"+f, unix.O_RDONLY|unix.O_CLOEXEC, 0) // read-only files
		}
		if err != nil {
			continue
		}
		if d.open == nil {
			d.open = map[string]int{}
		}
		d.open[f] = fd
	}
}

// release closes what keep opened.
func (d *cgDir) release() {
	for f, fd := range d.open {
		unix.Close(fd)
		delete(d.open, f)
	}
}

// read reads the control file name of d into buf — the caller's, which can stay on
// its stack (counters are read at every settle) — through its open descriptor, or by
// path.
func (d cgDir) read(name string, buf []byte) ([]byte, bool) {
	fd, ok := d.open[name]
	if !ok {
		return readSmall(d.path+"/"+name, buf)
	}
	return preadSmall(fd, buf)
}

func (d cgDir) number(name string) (int64, bool) {
	var buf [smallFile]byte
	b, ok := d.read(name, buf[:])
	return parseNumber(b, ok)
}

func (d cgDir) keyed(name, key string) (int64, bool) {
	var buf [smallFile]byte
	b, ok := d.read(name, buf[:])
	return parseKeyed(b, ok, key)
}

// smallFile bounds the control files read here (a few lines each).
const smallFile = 1024

// preadSmall reads the open control file fd from its start into buf.
func preadSmall(fd int, buf []byte) ([]byte, bool) {
	n, err := unix.Pread(fd, buf, 0)
	if err != nil || n < 0 {
		return nil, false
	}
	return buf[:n], true
}

func (d cgDir) write(file, value string) error {
	var err error
	if fd, ok := d.open[file]; ok {
		_, err = unix.Pwrite(fd, []byte(value), 0)
	} else {
		err = writeSmallFile(d.path+"/"+file, value)
	}
	if err != nil {
		return &opError{op: "write " + strconv.Quote(value) + " to", path: d.path + "/" + file, err: err}
	}
	return nil
}

// readLimitFile reads a file holding one number; "max" (no limit), a missing or
// unreadable file are not a number.
func readLimitFile(path string) (int64, bool) {
	var buf [smallFile]byte
	b, ok := readSmall(path, buf[:])
	return parseNumber(b, ok)
}

func parseNumber(b []byte, ok bool) (int64, bool) {
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	return n, err == nil
}

// parseKeyed reads the number after key in a flat-keyed file ("oom_kill 3\n").
func parseKeyed(b []byte, ok bool, key string) (int64, bool) {
	if !ok {
		return 0, false
	}
	for len(b) > 0 { // line by line, without allocating (it is read at every settle)
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		k, v, found := bytes.Cut(line, []byte(" "))
		if found && string(k) == key {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// readSmall reads a small control file into buf in one read (they are rendered
// whole).
func readSmall(path string, buf []byte) ([]byte, bool) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	return preadSmall(fd, buf)
}

// v1Populated reports whether a process is left in the cgroup v1 directory dir or
// below it (cgroup.procs lists them; v1 has no cgroup.events).
func v1Populated(dir string) bool {
	var buf [smallFile]byte
	if b, ok := readSmall(dir+"/cgroup.procs", buf[:]); ok && len(bytes.TrimSpace(b)) > 0 {
		return true
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() && v1Populated(dir+"/"+e.Name()) {
			return true
		}
	}
	return false
}
