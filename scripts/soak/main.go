// Command soak drives one `dsh serve --http` with a mixed load for a while and reports,
// per window, what dsh holds: its RSS, descriptors, processes, cgroups and spill bytes,
// and the latency of each kind of call. It is not a test and CI does not run it:
//
//	go build -o /tmp/dsh ./cmd/dsh && go run ./scripts/soak -bin /tmp/dsh -duration 30m
//
// The load: -sessions session-lane clients and -principals stateless principals, each
// a worker calling in a loop — `true`, a command whose output spills, a sandboxed write
// (the profile extends the sandbox one), a background job read back with job_output —
// each session ending and starting again every -churn calls; and a reload of the
// profile every -reload (of the executor's config too, unless -reload-executor=false). When the time is up every session ends, and the last line
// compares what dsh holds then with what it held before the load: descriptors and
// processes must be back to their starting level.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	bin := flag.String("bin", "dsh", "the dsh binary to drive")
	duration := flag.Duration("duration", 30*time.Minute, "how long the load runs")
	window := flag.Duration("window", time.Minute, "how often figures are reported")
	sessions := flag.Int("sessions", 16, "session-lane clients at once")
	principals := flag.Int("principals", 4, "stateless-lane principals (one token each)")
	churn := flag.Int("churn", 50, "calls before a session ends and a new one starts")
	reload := flag.Duration("reload", 20*time.Second, "how often the profile is edited")
	executor := flag.Bool("reload-executor", true, "the reloads restart the executor too (its timeoutMs changes)")
	flag.Parse()
	if err := run(*bin, *duration, *window, *sessions, *principals, *churn, *reload, *executor); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// profile is the soak's n-th profile: the sandbox one, with the reloads toggling the
// approval policy (nothing here escalates) and, with executor, the executor's timeoutMs
// (the executor restarts; its sessions' boxes stay).
func profile(n int, executor bool) string {
	p := fmt.Sprintf("extends: sandbox\nplugins:\n  - id: approval\n    config:\n      policy: %s\n", []string{"ask", "deny"}[n%2])
	if executor {
		p += fmt.Sprintf("  - id: bash\n    config:\n      timeoutMs: %d\n", 60000+n%2*1000)
	}
	return p
}

type soak struct {
	url    string
	tokens []string
	dir    string // TMPDIR of dsh: its spill and sandbox directories
	pid    int
	lat    latencies
	errs   atomic.Int64
	calls  atomic.Int64
	stderr *os.File
}

func run(bin string, duration, window time.Duration, sessions, principals, churn int, reload time.Duration, executor bool) error {
	work, err := os.MkdirTemp("", "dsh-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	s := &soak{dir: filepath.Join(work, "tmp")}
	for _, d := range []string{s.dir, filepath.Join(work, "ws")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	for i := range principals + 1 {
		s.tokens = append(s.tokens, fmt.Sprintf("soak-token-%d-%d", i, rand.Int64()))
	}
	tokenFile := filepath.Join(work, "tokens")
	profilePath := filepath.Join(work, "profile.yaml")
	os.WriteFile(tokenFile, []byte(strings.Join(s.tokens, "\n")+"\n"), 0o600)
	os.WriteFile(profilePath, []byte(profile(0, executor)), 0o644)
	if s.stderr, err = os.Create(filepath.Join(work, "serve.log")); err != nil {
		return err
	}
	cmd := exec.Command(bin, "serve", "--http", "127.0.0.1:0", "--token-file", tokenFile, "--profile", profilePath,
		"--workspace", filepath.Join(work, "ws"), "--max-sessions", strconv.Itoa(sessions+principals+8), "--log-level", "warn",
		"--session-timeout", "5s") // a principal's session ends 5 s after its last request
	cmd.Env = append(os.Environ(), "TMPDIR="+s.dir)
	errPipe, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	s.pid = cmd.Process.Pid
	if s.url, err = address(errPipe, s.stderr); err != nil {
		return err
	}

	// A warm-up with every worker at once fills what dsh keeps for reuse (free cgroups,
	// pipes, the sandbox probe, the limits' hierarchies); its sessions have ended when
	// their processes are gone.
	var warm sync.WaitGroup
	for i := range sessions + principals {
		warm.Go(func() { s.worker(context.Background(), i, churn, i >= sessions) })
	}
	warm.Wait()
	start := s.settle(func(f figures) bool { return f.procs == 0 })
	s.lat.take()
	s.calls.Store(0)
	fmt.Printf("start: %s\n", start)
	fmt.Printf("%-6s %8s %5s %5s %7s %10s %7s %5s  latency ms p50/p95/max by kind\n", "window", "RSS kB", "fds", "procs", "cgroups", "spill B", "calls", "errs")

	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var wg sync.WaitGroup
	for i := range sessions + principals {
		wg.Go(func() {
			for ctx.Err() == nil {
				s.worker(ctx, i, churn, i >= sessions)
			}
		})
	}
	wg.Go(func() { reloadEvery(ctx, reload, profilePath, executor) })
	s.report(ctx, window)
	wg.Wait()
	// Every session has ended (a principal's 5 s after its last request): what their
	// jobs, boxes and spill files held is released.
	end := s.settle(func(f figures) bool { return f.fds <= start.fds && f.procs <= start.procs })
	fmt.Printf("end:   %s\n", end)
	if end.fds > start.fds || end.procs > start.procs {
		s.describe()
		return fmt.Errorf("not back to the starting level: %d fds and %d processes, %d and %d at the start", end.fds, end.procs, start.fds, start.procs)
	}
	fmt.Println("fds and processes are back to their starting level")
	return nil
}

// describe prints what dsh holds: its processes and its descriptors.
func (s *soak) describe() {
	for _, p := range descendants(s.pid) {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		fmt.Printf("process %d: %s\n", p, strings.ReplaceAll(string(cmd), "\x00", " "))
	}
	dir := fmt.Sprintf("/proc/%d/fd", s.pid)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		target, _ := os.Readlink(filepath.Join(dir, e.Name()))
		fmt.Printf("fd %s: %s\n", e.Name(), target)
	}
}

// settle measures every second until ok holds, for up to a minute, and returns the
// last figures.
func (s *soak) settle(ok func(figures) bool) figures {
	f := s.measure()
	for deadline := time.Now().Add(time.Minute); !ok(f) && time.Now().Before(deadline); f = s.measure() {
		time.Sleep(time.Second)
	}
	return f
}

// address reads dsh's stderr until it says where it serves, then copies the rest to log.
func address(stderr interface{ Read([]byte) (int, error) }, log *os.File) (string, error) {
	sc := bufio.NewScanner(stderr)
	re := regexp.MustCompile(`on (http://\S+)`)
	for sc.Scan() {
		fmt.Fprintln(log, sc.Text())
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			go func() {
				for sc.Scan() {
					fmt.Fprintln(log, sc.Text())
				}
			}()
			return m[1], nil
		}
	}
	return "", fmt.Errorf("dsh serve did not say where it serves (see its log)")
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// worker is one session: it connects (session lane, or a principal's stateless lane),
// makes calls calls of every kind, and ends the session.
func (s *soak) worker(ctx context.Context, i, calls int, stateless bool) {
	token := s.tokens[0]
	opts := &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
	if stateless {
		token, opts = s.tokens[1+i%(len(s.tokens)-1)], nil
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "soak", Version: "1"}, nil)
	connect, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cs, err := cl.Connect(connect, &mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: &http.Client{Transport: bearer{token}}}, opts)
	if err != nil {
		if ctx.Err() == nil {
			s.errs.Add(1)
		}
		return
	}
	defer cs.Close()
	for n := 0; n < calls && ctx.Err() == nil; n++ {
		kind := []string{"true", "true", "output", "sandbox", "job"}[rand.IntN(5)]
		s.call(ctx, cs, kind)
	}
}

// call makes one call of kind and records its latency (a job: its start and its read).
func (s *soak) call(ctx context.Context, cs *mcp.ClientSession, kind string) {
	args := map[string]any{"description": "Soak"}
	switch kind {
	case "true":
		args["command"] = "true"
	case "output":
		args["command"] = "head -c 300000 /dev/zero | tr '\\0' x"
	case "sandbox":
		args["command"] = "echo x > soak-$$ && rm soak-$$ && touch /etc/soak 2>/dev/null; true"
	case "job":
		args["command"] = "sleep 0.2; echo done"
		args["run_in_background"] = true
	}
	start := time.Now()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: args})
	if kind == "job" && err == nil && !res.IsError {
		id, _ := res.StructuredContent.(map[string]any)["jobId"].(string)
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "job_output", Arguments: map[string]any{"job_id": id, "wait": true, "timeout_ms": 30000}})
	}
	if ctx.Err() != nil {
		return
	}
	s.calls.Add(1)
	if err != nil || res.IsError {
		if s.errs.Add(1) <= 3 {
			text := ""
			if err == nil && len(res.Content) > 0 {
				text = res.Content[0].(*mcp.TextContent).Text
			}
			fmt.Fprintf(os.Stderr, "soak: a %s call failed: %v %.200q\n", kind, err, text)
		}
		return
	}
	s.lat.add(kind, time.Since(start))
}

// figures are what dsh holds at one moment.
type figures struct {
	rss, fds, procs, cgroups int
	spill                    int64
}

func (f figures) row() string {
	return fmt.Sprintf("%8d %5d %5d %7d %10d", f.rss, f.fds, f.procs, f.cgroups, f.spill)
}

func (f figures) String() string {
	return fmt.Sprintf("RSS %d kB, %d fds, %d processes, %d cgroups, %d spill bytes", f.rss, f.fds, f.procs, f.cgroups, f.spill)
}

func (s *soak) measure() figures {
	var f figures
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pid)); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				f.rss, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			}
		}
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.pid))
	f.fds = len(fds)
	f.procs = len(descendants(s.pid))
	f.cgroups = countCgroups(s.pid)
	filepath.Walk(s.dir, func(path string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && strings.Contains(path, "dsh-spill-") {
			f.spill += fi.Size()
		}
		return nil
	})
	return f
}

// descendants lists the processes below pid.
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], p)
	}
	var out []int
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		out = append(out, children[queue[0]]...)
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// countCgroups counts the cgroups below dsh's own cgroup directory (dsh-<pid>-…).
func countCgroups(pid int) int {
	matches, _ := filepath.Glob(fmt.Sprintf("/sys/fs/cgroup/unified/dsh-%d-*", pid))
	if len(matches) == 0 {
		matches, _ = filepath.Glob(fmt.Sprintf("/sys/fs/cgroup/*/dsh-%d-*", pid))
	}
	n := 0
	for _, m := range matches {
		filepath.WalkDir(m, func(_ string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				n++
			}
			return nil
		})
	}
	return n
}

// latencies collects call latencies by kind for the current window.
type latencies struct {
	mu sync.Mutex
	by map[string][]time.Duration
}

func (l *latencies) add(kind string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by == nil {
		l.by = map[string][]time.Duration{}
	}
	l.by[kind] = append(l.by[kind], d)
}

// take renders the window's p50/p95/max per kind and starts a new window.
func (l *latencies) take() string {
	l.mu.Lock()
	by := l.by
	l.by = nil
	l.mu.Unlock()
	var parts []string
	for _, kind := range []string{"true", "output", "sandbox", "job"} {
		d := by[kind]
		if len(d) == 0 {
			continue
		}
		slices.Sort(d)
		ms := func(x time.Duration) float64 { return float64(x.Microseconds()) / 1000 }
		parts = append(parts, fmt.Sprintf("%s %.1f/%.1f/%.0f", kind, ms(d[len(d)/2]), ms(d[len(d)*95/100]), ms(d[len(d)-1])))
	}
	return strings.Join(parts, "  ")
}

// reloadEvery rewrites the profile at path every interval (its executor's config too,
// with executor) until ctx ends.
func reloadEvery(ctx context.Context, interval time.Duration, path string, executor bool) {
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
		tmp := path + ".tmp"
		os.WriteFile(tmp, []byte(profile(n, executor)), 0o644)
		os.Rename(tmp, path)
	}
}

// report prints a line of figures every window until ctx ends.
func (s *soak) report(ctx context.Context, window time.Duration) {
	ticker := time.NewTicker(window)
	defer ticker.Stop()
	for w := 1; ; w++ {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			fmt.Printf("%-6d %s %7d %5d  %s\n", w, s.measure().row(), s.calls.Swap(0), s.errs.Swap(0), s.lat.take())
		}
	}
}
