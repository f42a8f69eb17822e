// Package proctest holds test helpers for packages that spawn processes: polling with a
// deadline, waiting for a process to settle, process liveness by pid, pid files,
// children, descriptor-leak checks, a leftover-process check, shell quoting, a
// goroutine-safe output sink (also a log sink), and the paired benchmark against the raw
// spawn floor. Tests only (the conformance kits, which are test code, included);
// production code must not import it.
//
// Leftover detection works by marking the environment: Main sets a unique
// DSHTEST_MARK in the test binary's environment before the tests run, every child
// inherits it (the subprocess scrub keeps it), and Leftovers finds live processes
// carrying it.
package proctest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsh-dev/dsh/proc"
)

// MarkerVar is the environment variable that marks this test run's processes.
const MarkerVar = "DSHTEST_MARK"

var marker string

// Main runs the tests with a leftover-process marker set, then fails the run if a
// goroutine leaked (goleak) or a marked process is still alive (after a grace of ten
// seconds for processes that are just dying). Call it from TestMain.
func Main(m *testing.M, opts ...goleak.Option) {
	if os.Getenv(MarkerVar) == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		os.Setenv(MarkerVar, hex.EncodeToString(b))
	}
	marker = os.Getenv(MarkerVar)
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	if code == 0 {
		if left := leftoversAfter(10 * time.Second); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "processes left behind by the tests: %s\n", Describe(left))
			code = 1
		}
	}
	os.Exit(code)
}

// Settler is a process that settles: the subprocess and ssh Process types, and the
// executor core's.
type Settler interface {
	Pid() int
	Done() <-chan struct{}
	Exit() (proc.Exit, bool)
}

// AwaitExit waits up to d for p to settle and returns how it ended, failing t if it
// does not settle in time or reports no exit once settled.
func AwaitExit(t testing.TB, p Settler, d time.Duration) proc.Exit {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(d):
		t.Fatalf("process %d did not settle within %v", p.Pid(), d)
	}
	ex, ok := p.Exit()
	if !ok {
		t.Fatal("Exit() not ok after Done")
	}
	return ex
}

// ExitState is Running until x has settled (its Exit reports false), then its exit's
// State.
func ExitState(x interface{ Exit() (proc.Exit, bool) }) proc.State {
	ex, ok := x.Exit()
	if !ok {
		return proc.Running
	}
	return ex.State()
}

// Code is the exit's code, or -1 when it has none.
func Code(ex proc.Exit) int {
	if ex.Code == nil {
		return -1
	}
	return *ex.Code
}

// SeqOutput is what `seq 1 n` prints.
func SeqOutput(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.String()
}

// Record collects strings from concurrent writers (state descriptions, notices).
type Record struct {
	mu  sync.Mutex
	all []string
}

// Add records s.
func (r *Record) Add(s string) {
	r.mu.Lock()
	r.all = append(r.all, s)
	r.mu.Unlock()
}

// All is a copy of what was recorded, oldest first.
func (r *Record) All() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.all)
}

// HasPrefix reports whether a recorded string starts with prefix.
func (r *Record) HasPrefix(prefix string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.all, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

// WaitFor polls cond until it holds, failing t after d.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(d, cond) {
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// Until polls cond every few milliseconds until it holds or d passes, and reports
// whether it held: WaitFor for a caller that words its own failure.
func Until(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// Proc is one process as /proc/<pid>/stat shows it.
type Proc struct {
	Pid, Ppid, Pgid int
	State           byte // R, S, Z…
	Comm            string
}

// Stat reads /proc/<pid>/stat.
func Stat(pid int) (Proc, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Proc{}, err
	}
	s := string(data)
	// The command name is in parentheses and may hold spaces and parentheses itself.
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || end+2 >= len(s) {
		return Proc{}, errors.New("malformed stat")
	}
	f := strings.Fields(s[end+2:])
	if len(f) < 3 {
		return Proc{}, errors.New("malformed stat")
	}
	p := Proc{Pid: pid, Comm: s[open+1 : end], State: f[0][0]}
	p.Ppid, _ = strconv.Atoi(f[1])
	p.Pgid, _ = strconv.Atoi(f[2])
	return p, nil
}

// Processes lists every process /proc shows.
func Processes() []Proc {
	entries, _ := os.ReadDir("/proc")
	out := make([]Proc, 0, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := Stat(pid); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// State returns the state letter of pid from /proc (R, S, Z…), or 0 if it does not exist.
func State(pid int) byte {
	p, _ := Stat(pid)
	return p.State
}

// Gone reports whether pid no longer runs: it does not exist or is a zombie (orphans
// are reparented to an init that may never reap them).
func Gone(pid int) bool {
	s := State(pid)
	return s == 0 || s == 'Z' || s == 'X'
}

// AllGone reports whether every pid is gone.
func AllGone(pids ...int) bool {
	for _, p := range pids {
		if !Gone(p) {
			return false
		}
	}
	return true
}

// Leftovers lists live processes, other than this one, carrying this run's marker.
func Leftovers() []int {
	if marker == "" {
		return nil
	}
	return Carrying(MarkerVar + "=" + marker)
}

// Carrying lists live processes, other than this one, whose environment holds the
// entry "NAME=value".
func Carrying(entry string) []int {
	needle := []byte(entry + "\x00")
	self := os.Getpid()
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || Gone(pid) {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && bytes.Contains(env, needle) && !Gone(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// WithArg lists live processes whose command line has word as one of its arguments
// (argv[0] included: `exec -a word` names a process so).
func WithArg(word string) []int {
	needle := []byte("\x00" + word + "\x00")
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(append([]byte{0}, cmd...), needle) && !Gone(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// Describe renders pids with their command lines, for failure messages.
func Describe(pids []int) string {
	var parts []string
	for _, p := range pids {
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
		parts = append(parts, fmt.Sprintf("%d (%s)", p, strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))))
	}
	return strings.Join(parts, ", ")
}

// NoLeftovers registers a cleanup that fails t if a marked process is still alive ten
// seconds after the test ended. Tests that use it must not run in parallel with other
// process-spawning tests of the same binary.
func NoLeftovers(t testing.TB) {
	t.Helper()
	t.Cleanup(func() {
		if left := leftoversAfter(10 * time.Second); len(left) > 0 {
			t.Errorf("processes left behind: %s", Describe(left))
		}
	})
}

// leftoversAfter waits up to d for the marked processes to end (they may be just
// dying) and returns those still alive then.
func leftoversAfter(d time.Duration) []int {
	var left []int
	Until(d, func() bool { left = Leftovers(); return len(left) == 0 })
	return left
}

// KillPids SIGKILLs pids that are still alive (cleanup of processes a test expects to
// survive, such as a daemon that escaped its process group). It signals by pid rather
// than through os.FindProcess, which would hold a pidfd until a finalizer runs.
func KillPids(pids ...int) {
	for _, p := range pids {
		if p > 1 && !Gone(p) && leaderOfOther(p) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
}

// leaderOfOther reports whether pid is a process (its thread group's leader) other
// than this one: a pid the test wrote down may be a thread id by now, maybe one of
// this process's own threads, which kill would take for the whole process.
func leaderOfOther(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			tgid, err := strconv.Atoi(strings.TrimSpace(v))
			return err == nil && tgid == pid && tgid != os.Getpid()
		}
	}
	return false
}

// FDs maps this process's open descriptors to what they refer to.
func FDs(t testing.TB) map[string]string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("list fds: %v", err)
	}
	out := make(map[string]string, len(entries))
	for _, e := range entries {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out[e.Name()] = target
	}
	return out
}

// NewFDs lists the descriptors open in after that were not open (to the same file) in
// before: the leaks. Descriptors closed in between are not leaks and are ignored.
func NewFDs(before, after map[string]string) []string {
	var leaked []string
	for fd, target := range after {
		if prev, ok := before[fd]; !ok || prev != target {
			if target == "" || strings.HasPrefix(target, "/proc/") {
				continue // the directory being listed
			}
			leaked = append(leaked, fd+" → "+target)
		}
	}
	return leaked
}

// ReadPids parses whitespace-separated pids from a file (0 entries if it is absent).
func ReadPids(path string) []int {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return parsePids(data)
}

func parsePids(data []byte) []int {
	var out []int
	for _, f := range strings.Fields(string(data)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// WaitPidFile waits until path holds one pid on a whole line (what `echo $$ > path`
// writes) and returns it, failing t after 20 seconds.
func WaitPidFile(t testing.TB, path string) int {
	t.Helper()
	var pids []int
	WaitFor(t, 20*time.Second, "the pid file "+path, func() bool {
		data, err := os.ReadFile(path)
		if err != nil || !bytes.HasSuffix(data, []byte("\n")) {
			return false
		}
		pids = parsePids(data)
		return len(pids) == 1 && pids[0] > 0
	})
	return pids[0]
}

// Children lists the pids of this process's children (zombies included).
func Children() []int {
	self := os.Getpid()
	var out []int
	for _, p := range Processes() {
		if p.Ppid == self {
			out = append(out, p.Pid)
		}
	}
	return out
}

// Quote quotes s as one word of a POSIX shell command line.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Buffer is a goroutine-safe output sink (a child's stderr, a logger's output) that a
// test reads while it is written.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Logger logs into the buffer (text format), for assertions on log output.
func (b *Buffer) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// PairedWithTrue alternates run with a raw os/exec run of `bash -c true` (its output
// read into memory), so that load from other processes affects both alike, and reports
// the median of each and their ratio: name-median-ns, raw-median-ns and name/raw.
func PairedWithTrue(b *testing.B, name string, run func()) {
	var own, raw []time.Duration
	for b.Loop() {
		t0 := time.Now()
		run()
		t1 := time.Now()
		var stdout, stderr bytes.Buffer
		cmd := exec.Command("bash", "-c", "true")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		own = append(own, t1.Sub(t0))
		raw = append(raw, t2.Sub(t1))
	}
	o, r := Median(own), Median(raw)
	b.ReportMetric(float64(o.Nanoseconds()), name+"-median-ns")
	b.ReportMetric(float64(r.Nanoseconds()), "raw-median-ns")
	b.ReportMetric(float64(o)/float64(r), name+"/raw")
}

// RawRead runs `bash -c command` through os/exec alone, reads its stdout into
// io.Discard, and returns the bytes read: the floor a captured read is measured against.
func RawRead(t testing.TB, command string) int64 {
	cmd := exec.Command("bash", "-c", command)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, out)
	if werr := cmd.Wait(); err == nil {
		err = werr
	}
	if err != nil {
		t.Fatalf("raw read of %q: %v", command, err)
	}
	return n
}

// Median is the middle of d (the upper one of an even count); d is left as it is.
func Median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// DiskUsage sums the sizes of the files in dir ("" = none yet); files deleted while it
// looks are skipped.
func DiskUsage(t testing.TB, dir string) int64 {
	t.Helper()
	sum, _ := fileSizes(t, dir)
	return sum
}

// DiskSample sums the sizes of the files in dir while they are being written and
// deleted. Spill files only grow until deleted and their names are never reused, so
// if every counted file still exists after the scan, each existed at the moment the
// scan ended with at least the counted size: the sum is at most what the directory
// held at that one moment. ok is false when a counted file vanished (sample discarded).
func DiskSample(t testing.TB, dir string) (sum int64, ok bool) {
	t.Helper()
	sum, counted := fileSizes(t, dir)
	for _, path := range counted {
		if _, err := os.Lstat(path); err != nil {
			return 0, false
		}
	}
	return sum, true
}

// fileSizes sums the sizes of the files below dir ("" = none yet) and lists the files
// it counted; files deleted while it looks are skipped.
func fileSizes(t testing.TB, dir string) (sum int64, counted []string) {
	t.Helper()
	for _, path := range SpillFiles(t, dir) {
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sum += fi.Size()
		counted = append(counted, path)
	}
	return sum, counted
}

// SpillFiles lists the files below dir (in its owner directories), sorted; files and
// directories deleted while it looks are skipped.
func SpillFiles(t testing.TB, dir string) []string {
	t.Helper()
	if dir == "" {
		return nil
	}
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if !d.IsDir() {
			names = append(names, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	return names
}

// OwnCgroupV1 is this process's cgroup in the cgroup v1 hierarchy of controller
// (mounted at /sys/fs/cgroup/<controller>, as on a hybrid host); the test is skipped
// where there is none.
func OwnCgroupV1(t testing.TB, controller string) string {
	t.Helper()
	data, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && parts[1] == controller {
			dir := filepath.Join("/sys/fs/cgroup", controller, parts[2])
			if _, err := os.Stat(dir); err == nil {
				return dir
			}
		}
	}
	t.Skipf("no cgroup v1 %s hierarchy here", controller)
	return ""
}
