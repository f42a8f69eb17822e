// Package shelltest is the conformance kit of the executor seam: Run checks that an
// executor honours the contract written in package shell, through the seam alone
// (Resolve, Execute and an Execution's methods), one parallel subtest per rule:
//
//   - Resolve: defaults and caps; timeoutMs clamped, or rejected with the executor's
//     name; NUL bytes; workdirs; expiry none; a spec that shares nothing with its request.
//   - Results: output, exit codes, signal deaths, sandbox facts only from a confining
//     executor, results as values.
//   - Timeout, TreeKill, Grace: the deadline, the whole tree ended (a background child
//     too), SIGKILL only after graceMs.
//   - AbortAndKill: a cancelled context (before the spawn, and while running: Aborted)
//     versus Kill (neither flag, idempotent); Result's context bounds only the wait.
//   - OutputBounds: both streams capped to their tail, spill files with the whole.
//   - ConsumingReads, LossyReads, UTF8: reads give only what is new, report dropped
//     output with its spill file, never split a character.
//   - SpawnFailure: a failed start as Result's error and, once, as a background read.
//   - Environment: the request's variables over the fixed ones, the DSH_* snapshot
//     winning, stdin. Concurrency: twenty calls at once, each with its own output.
//   - Terminal (for an executor that implements shell.Terminals): TERM and the size,
//     one output stream, a prompt read and answered, the foreground process seen
//     waiting for input where the executor can tell, ^C ending a sleep by SIGINT, ^D
//     and CloseInput ending a reader's input, no input after the end.
//   - HandOver: a hand-over expiry outlives its timeout; Detach frees a command from
//     its call's deadline and context, and reads continue where they were.
//   - TermOnce: each process receives one SIGTERM per teardown, by Kill and by timeout
//     (a wrapper that forwards the signal again, as coreutils timeout does, fails it).
//
// It does not check what the model sees through the bash tool (renderings, the
// truncation notice, background jobs): package toolbashtest does, and every executor
// runs both. Nor does it check an executor's config keys and plugin wiring, what a
// sandbox denies, or reloads and lost connections: those are the executor's own tests.
//
//	func TestConformance(t *testing.T) {
//		target := shelltest.Target{
//			Name: bashnice.Name,
//			New: func(t *testing.T, cfg bashexec.Config) (shell.Executor, shell.PolicyResolver) {
//				sup := subprocess.New(subprocess.Options{SpillRoot: t.TempDir()})
//				t.Cleanup(sup.Close)
//				ex, err := bashnice.New(sup, &bashnice.Config{Config: cfg, Niceness: 10})
//				if err != nil {
//					t.Fatal(err)
//				}
//				return ex, nil
//			},
//		}
//		shelltest.Run(t, target)
//		toolbashtest.Run(t, target)
//	}
//
// The kit runs real commands (bash, sh, sleep, head, tr, printf, touch, cat, seq,
// mkfifo — what any POSIX host has) in directories it gets from Target.Dir, and waits with deadlines
// rather than sleeps. It takes a few seconds.
package shelltest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/proc"
	"github.com/dsh-dev/dsh/shell"
	"github.com/dsh-dev/dsh/shell/bashexec"
)

// Target is the executor under test.
type Target struct {
	// Name is the executor's name as it prefixes its errors ("bash-local").
	Name string
	// New returns the executor configured with cfg — cfg.Cwd is a directory from Dir —
	// and, for a confining executor, its sandboxPolicy service (nil otherwise). It is
	// called once per subtest; release resources with t.Cleanup. A confining executor
	// should let its default mode write to cfg.Cwd (workspace-write with cfg.Cwd as the
	// workspace root): the kit synchronises through files it creates there.
	New func(t *testing.T, cfg bashexec.Config) (shell.Executor, shell.PolicyResolver)
	// Dir returns a fresh, empty, writable directory on the executor's host, as an
	// absolute path there. Default: t.TempDir() (a local executor).
	Dir func(t *testing.T) string
	// Running reports whether a process whose command line contains marker is still
	// alive (not a zombie) on the executor's host. Default: a scan of this host's /proc.
	Running func(marker string) bool
}

// grace is the graceMs the kits configure: short, so that kills are quick.
const grace = 500

// Executor is target's executor for one subtest, configured as the kits configure it:
// the defaults, cfg.Cwd a fresh directory from Dir, graceMs 500, then tune (if not
// nil). It returns what New returned and that config. Kits built on this one (package
// toolbashtest) use it.
func (target Target) Executor(t *testing.T, tune func(*bashexec.Config)) (shell.Executor, shell.PolicyResolver, bashexec.Config) {
	t.Helper()
	cfg := bashexec.DefaultConfig()
	if target.Dir != nil {
		cfg.Cwd = target.Dir(t)
	} else {
		cfg.Cwd = t.TempDir()
	}
	cfg.GraceMs = grace
	if tune != nil {
		tune(&cfg)
	}
	ex, policy := target.New(t, cfg)
	if ex == nil {
		t.Fatal("Target.New returned no executor")
	}
	return ex, policy, cfg
}

// Run checks target against the seam's contract, one subtest per rule.
func Run(t *testing.T, target Target) {
	t.Helper()
	if target.Name == "" || target.New == nil {
		t.Fatal("shelltest: Target needs a Name and New")
	}
	if target.Running == nil {
		target.Running = runningLocally
	}
	k := &kit{target: target}
	for _, c := range []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"Resolve", k.resolve},
		{"Results", k.results},
		{"Timeout", k.timeout},
		{"TreeKill", k.treeKill},
		{"Grace", k.grace},
		{"AbortAndKill", k.abortAndKill},
		{"OutputBounds", k.outputBounds},
		{"ConsumingReads", k.consumingReads},
		{"LossyReads", k.lossyReads},
		{"UTF8", k.utf8},
		{"SpawnFailure", k.spawnFailure},
		{"Environment", k.environment},
		{"Concurrency", k.concurrency},
		{"Terminal", k.terminal},
		{"HandOver", k.handOver},
		{"TermOnce", k.termOnce},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t)
		})
	}
}

type kit struct{ target Target }

// env is one executor under test with its directory.
type env struct {
	t      *testing.T
	ex     shell.Executor
	policy shell.PolicyResolver
	dir    string
	cfg    bashexec.Config
}

func (k *kit) env(t *testing.T, tune func(*bashexec.Config)) *env {
	t.Helper()
	ex, policy, cfg := k.target.Executor(t, tune)
	return &env{t: t, ex: ex, policy: policy, dir: cfg.Cwd, cfg: cfg}
}

func (e *env) spec(req shell.ExecRequest) shell.ExecSpec {
	e.t.Helper()
	spec, err := e.ex.Resolve(req)
	if err != nil {
		e.t.Fatalf("Resolve(%q): %v", req.Command, err)
	}
	return spec
}

func (e *env) start(ctx context.Context, req shell.ExecRequest) shell.Execution {
	e.t.Helper()
	x, err := e.ex.Execute(ctx, e.spec(req))
	if err != nil {
		e.t.Fatalf("Execute(%q): %v", req.Command, err)
	}
	return x
}

// run runs a command in the foreground and returns its result.
func (e *env) run(req shell.ExecRequest) shell.RunResult {
	e.t.Helper()
	res, err := e.start(context.Background(), req).Result(context.Background())
	if err != nil {
		e.t.Fatalf("Result(%q): %v", req.Command, err)
	}
	return res
}

// gate returns a path in the executor's directory and a function that creates it there
// (through the executor itself: the directory may be on another host).
func (e *env) gate(name string) (path string, open func()) {
	path = e.dir + "/" + name
	return path, func() {
		e.t.Helper()
		res := e.run(shell.ExecRequest{Command: "touch " + proctest.Quote(path)})
		if res.ExitCode == nil || *res.ExitCode != 0 {
			e.t.Fatalf("touch %s: %+v", path, res)
		}
	}
}

// readUntil collects ReadOutput deltas until want is a prefix of (or equal to) what was
// read, and returns everything read.
func readUntil(t *testing.T, x shell.Execution, want string) string {
	t.Helper()
	var got strings.Builder
	if !proctest.Until(20*time.Second, func() bool {
		got.WriteString(x.ReadOutput().Delta)
		return strings.HasPrefix(got.String(), want)
	}) {
		t.Fatalf("reads gave %q; waited for %q", got.String(), want)
	}
	return got.String()
}

func done(t *testing.T, x shell.Execution, d time.Duration) {
	t.Helper()
	select {
	case <-x.Done():
	case <-time.After(d):
		t.Fatalf("the execution did not finish within %s", d)
	}
}

func newMarker() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "dsh-kit-" + hex.EncodeToString(b)
}

func code(r shell.RunResult) string {
	if r.ExitCode == nil {
		return "nil"
	}
	return strconv.Itoa(*r.ExitCode)
}

func f64(v float64) *float64 { return &v }

func (k *kit) resolve(t *testing.T) {
	e := k.env(t, nil)
	name := k.target.Name
	spec, err := e.ex.Resolve(shell.ExecRequest{Command: "true", SessionID: "s-1"})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Command != "true" || spec.Workdir != e.dir || spec.TimeoutMs != 120000 || spec.StdoutMaxBytes != 64000 ||
		spec.Expiry != shell.ExpiryKill || spec.Stdin != nil || spec.Env != nil || spec.DshEnv != nil || spec.SessionID != "s-1" {
		t.Errorf("defaults: %+v (cwd %s)", spec, e.dir)
	}
	for _, c := range []struct {
		in   float64
		want int64
	}{{1, 1}, {1500.2, 1501}, {600000, 600000}, {600001, 600000}, {1e300, 600000}} {
		if spec, err := e.ex.Resolve(shell.ExecRequest{Command: "true", TimeoutMs: f64(c.in)}); err != nil || spec.TimeoutMs != c.want {
			t.Errorf("timeoutMs %v → %d, %v; want %d (clamped to the cap, not rejected)", c.in, spec.TimeoutMs, err, c.want)
		}
	}
	for _, bad := range []struct {
		in   float64
		text string
	}{{0, "0"}, {-5, "-5"}} {
		want := name + ": request.timeoutMs must be a positive number, got " + bad.text
		if _, err := e.ex.Resolve(shell.ExecRequest{Command: "true", TimeoutMs: f64(bad.in)}); err == nil || err.Error() != want {
			t.Errorf("timeoutMs %v: %v, want %q", bad.in, err, want)
		}
	}
	if _, err := e.ex.Resolve(shell.ExecRequest{Command: "echo a\x00b"}); err == nil || err.Error() != name+": invalid command: it contains a NUL byte" {
		t.Errorf("NUL byte: %v", err)
	}
	for _, c := range [][2]string{{"sub", e.dir + "/sub"}, {"sub/../other", e.dir + "/other"}, {"/abs/./x/..", "/abs"}} {
		if spec, err := e.ex.Resolve(shell.ExecRequest{Command: "true", Workdir: c[0]}); err != nil || spec.Workdir != c[1] {
			t.Errorf("workdir %q → %q, %v; want %q", c[0], spec.Workdir, err, c[1])
		}
	}
	if spec, err := e.ex.Resolve(shell.ExecRequest{Command: "true", Expiry: shell.ExpiryNone, TimeoutMs: f64(5)}); err != nil || spec.TimeoutMs != 0 || spec.Expiry != shell.ExpiryNone {
		t.Errorf("expiry none: %+v, %v; want no deadline", spec, err)
	}
	stdin, env, dsh := "in", map[string]string{"A": "1"}, map[string]string{"DSH_X": "1"}
	spec, err = e.ex.Resolve(shell.ExecRequest{Command: "true", Stdin: &stdin, Env: env, DshEnv: dsh})
	if err != nil {
		t.Fatal(err)
	}
	env["A"], dsh["DSH_X"], stdin = "changed", "changed", "changed"
	if spec.Stdin == nil || *spec.Stdin != "in" || spec.Env["A"] != "1" || spec.DshEnv["DSH_X"] != "1" {
		t.Errorf("the spec shares state with the request: %+v", spec)
	}
}

func (k *kit) results(t *testing.T) {
	e := k.env(t, nil)
	res := e.run(shell.ExecRequest{Command: "echo hello"})
	if res.Stdout.Text != "hello\n" || res.Stderr.Text != "" || code(res) != "0" || res.Signal != "" ||
		res.TimedOut || res.Aborted || res.TimeoutMs != 120000 || res.Stdout.Truncated || res.Stdout.SpillPath != "" {
		t.Errorf("echo hello: %+v", res)
	}
	switch mode := e.ex.SandboxMode(); {
	case mode == "" && res.Sandbox != nil:
		t.Errorf("a non-confining executor reported sandbox facts %+v", *res.Sandbox)
	case mode != "" && (res.Sandbox == nil || res.Sandbox.Mode == "" || res.Sandbox.Denied || res.Sandbox.RunnerFailed):
		t.Errorf("a confining executor (default %s) reported sandbox facts %+v", mode, res.Sandbox)
	}
	res = e.run(shell.ExecRequest{Command: "echo out; echo err >&2; exit 3"})
	if res.Stdout.Text != "out\n" || res.Stderr.Text != "err\n" || code(res) != "3" || res.Signal != "" {
		t.Errorf("exit 3: %+v", res)
	}
	x := e.start(context.Background(), shell.ExecRequest{Command: "kill -TERM $$"})
	res, err := x.Result(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != nil || res.Signal != "SIGTERM" || res.TimedOut || res.Aborted {
		t.Errorf("kill -TERM $$: exit %s signal %q timedOut %v aborted %v; want SIGTERM and neither flag", code(res), res.Signal, res.TimedOut, res.Aborted)
	}
	if ex, ok := x.Exit(); !ok || ex.State() != proc.Killed || ex.Signal != "SIGTERM" || ex.Code != nil {
		t.Errorf("exit after a signal death %+v", ex)
	}
	if x.Kill() {
		t.Error("Kill of a finished execution returned true")
	}
	// Results are values: changing one does not change the next.
	x = e.start(context.Background(), shell.ExecRequest{Command: "exit 4"})
	first, _ := x.Result(context.Background())
	if first.ExitCode == nil {
		t.Fatal("exit 4: no exit code")
	}
	*first.ExitCode = 99
	if first.Sandbox != nil {
		first.Sandbox.Mode = "changed"
	}
	second, _ := x.Result(context.Background())
	if code(second) != "4" || (second.Sandbox != nil && second.Sandbox.Mode == "changed") {
		t.Errorf("a caller's change to a result leaked into the next Result: %+v", second)
	}
	if ex, ok := x.Exit(); !ok || ex.State() != proc.Completed || ex.Code == nil || *ex.Code != 4 {
		t.Errorf("exit after exit 4: %+v", ex)
	}
}

func (k *kit) timeout(t *testing.T) {
	e := k.env(t, nil)
	start := time.Now()
	res := e.run(shell.ExecRequest{Command: "sleep 60", TimeoutMs: f64(100)})
	elapsed := time.Since(start)
	if !res.TimedOut || res.Aborted || res.Signal != "SIGTERM" || res.ExitCode != nil || res.TimeoutMs != 100 {
		t.Errorf("sleep 60 with timeoutMs 100: %+v", res)
	}
	if limit := 100*time.Millisecond + grace*time.Millisecond + 5*time.Second; elapsed > limit {
		t.Errorf("the timed-out call took %s (more than timeout + grace + 5s)", elapsed)
	}
}

// A timeout ends the whole tree: a background child of the command is gone too.
func (k *kit) treeKill(t *testing.T) {
	e := k.env(t, nil)
	marker := newMarker()
	started := e.dir + "/started"
	start := time.Now()
	res := e.run(shell.ExecRequest{
		Command:   "sh -c 'sleep 300; : " + marker + "' & touch " + proctest.Quote(started) + "; sleep 60",
		TimeoutMs: f64(1000),
	})
	elapsed := time.Since(start)
	if !res.TimedOut {
		t.Fatalf("not timed out: %+v", res)
	}
	if limit := time.Second + grace*time.Millisecond + time.Second; elapsed > limit {
		t.Errorf("the call returned after %s (contract: within timeout + grace + 1s)", elapsed)
	}
	if !proctest.Until(5*time.Second, func() bool { return !k.target.Running(marker) }) {
		t.Errorf("the command's background child (marker %s) is still running after the timeout", marker)
	}
}

// A command that ignores SIGTERM is SIGKILLed after the grace period.
func (k *kit) grace(t *testing.T) {
	e := k.env(t, nil)
	x := e.start(context.Background(), shell.ExecRequest{Command: "trap '' TERM; echo ready; sleep 60", Expiry: shell.ExpiryNone})
	readUntil(t, x, "ready\n")
	killed := time.Now()
	if !x.Kill() {
		t.Fatal("Kill returned false for a running command")
	}
	done(t, x, grace*time.Millisecond+10*time.Second)
	took := time.Since(killed)
	res, err := x.Result(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Signal != "SIGKILL" || res.TimedOut || res.Aborted {
		t.Errorf("a TERM-ignoring command after Kill: %+v; want SIGKILL and neither flag", res)
	}
	if took < grace*time.Millisecond*9/10 {
		t.Errorf("SIGKILL came %s after Kill, before the %dms grace period", took, grace)
	}
}

func (k *kit) abortAndKill(t *testing.T) {
	e := k.env(t, nil)
	name := k.target.Name

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if x, err := e.ex.Execute(cancelled, e.spec(shell.ExecRequest{Command: "true"})); err == nil ||
		!strings.HasPrefix(err.Error(), name+": aborted before spawn: ") {
		if x != nil {
			<-x.Done()
		}
		t.Errorf("Execute with a cancelled context: %v; want %q", err, name+": aborted before spawn: …")
	}

	// Abort: cancelling Execute's context kills the tree and sets Aborted only.
	ctx, abort := context.WithCancel(context.Background())
	x := e.start(ctx, shell.ExecRequest{Command: "echo ready; sleep 60"})
	readUntil(t, x, "ready\n")
	abort()
	res, err := x.Result(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Aborted || res.TimedOut || res.Signal != "SIGTERM" {
		t.Errorf("aborted: %+v; want Aborted, SIGTERM", res)
	}

	// Kill: neither flag; idempotent; false once finished.
	x = e.start(context.Background(), shell.ExecRequest{Command: "echo ready; sleep 60", Expiry: shell.ExpiryNone})
	readUntil(t, x, "ready\n")
	if ex, ok := x.Exit(); ok {
		t.Errorf("exit while running: %+v", ex)
	}
	if !x.Kill() {
		t.Fatal("Kill of a running command returned false")
	}
	x.Kill()
	done(t, x, 20*time.Second)
	if x.Kill() {
		t.Error("Kill after the command finished returned true")
	}
	res, err = x.Result(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Aborted || res.TimedOut || res.Signal != "SIGTERM" {
		t.Errorf("killed: %+v; want SIGTERM and neither flag", res)
	}
	if ex, ok := x.Exit(); !ok || ex.State() != proc.Killed || ex.Signal != "SIGTERM" {
		t.Errorf("exit after Kill: %+v", ex)
	}

	// Result's context bounds the wait only.
	x = e.start(context.Background(), shell.ExecRequest{Command: "sleep 60", Expiry: shell.ExpiryNone})
	short, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer stop()
	if _, err := x.Result(short); err == nil {
		t.Error("Result returned before the command ended")
	}
	if ex, ok := x.Exit(); ok {
		t.Errorf("a Result wait that ended killed the command: %+v", ex)
	}
	x.Kill()
	done(t, x, 20*time.Second)
}

func (k *kit) outputBounds(t *testing.T) {
	e := k.env(t, func(c *bashexec.Config) { c.MaxOutputBytes = 1000 })
	res := e.run(shell.ExecRequest{Command: "head -c 5000 /dev/zero | tr '\\0' a; head -c 3000 /dev/zero | tr '\\0' b >&2"})
	for _, s := range []struct {
		name      string
		r         shell.StreamResult
		char      string
		total     int
		truncated bool
	}{{"stdout", res.Stdout, "a", 5000, true}, {"stderr", res.Stderr, "b", 3000, true}} {
		if s.r.Text != strings.Repeat(s.char, 1000) || !s.r.Truncated {
			t.Errorf("%s: %d bytes kept, truncated %v; want the last 1000 (both streams are capped)", s.name, len(s.r.Text), s.r.Truncated)
		}
		if s.r.SpillPath == "" {
			t.Errorf("%s: no spill file", s.name)
			continue
		}
		data, err := os.ReadFile(s.r.SpillPath)
		if err != nil || string(data) != strings.Repeat(s.char, s.total) {
			t.Errorf("%s spill file %s: %d bytes, %v; want the whole stream (%d)", s.name, s.r.SpillPath, len(data), err, s.total)
		}
	}
	small := e.run(shell.ExecRequest{Command: "echo small"})
	if small.Stdout.Truncated || small.Stdout.SpillPath != "" {
		t.Errorf("small output: %+v", small.Stdout)
	}
}

func (k *kit) consumingReads(t *testing.T) {
	e := k.env(t, nil)
	gate, open := e.gate("gate")
	x := e.start(context.Background(), shell.ExecRequest{
		Command: "echo one; while [ ! -e " + proctest.Quote(gate) + " ]; do sleep 0.01; done; echo two; echo err-two >&2",
		Expiry:  shell.ExpiryNone,
	})
	if got := readUntil(t, x, "one\n"); got != "one\n" {
		t.Errorf("first reads %q", got)
	}
	if r := x.ReadOutput(); r.Delta != "" || r.Lossy || r.StdoutSpillPath != "" || r.StderrSpillPath != "" {
		t.Errorf("a read with nothing new: %+v", r)
	}
	open()
	done(t, x, 20*time.Second)
	if r := x.ReadOutput(); r.Delta != "two\n[stderr]\nerr-two\n" || r.Lossy || r.StdoutSpillPath != "" || r.StderrSpillPath != "" {
		t.Errorf("read after the gate: %+v; want only the new output, stdout then stderr", r)
	}
	if r := x.ReadOutput(); r.Delta != "" {
		t.Errorf("read after the end: %+v", r)
	}
	if res, err := x.Result(context.Background()); err != nil || res.Stdout.Text != "one\ntwo\n" || res.Stderr.Text != "err-two\n" {
		t.Errorf("the result keeps the whole output after consuming reads: %+v, %v", res, err)
	}
}

func (k *kit) lossyReads(t *testing.T) {
	e := k.env(t, nil)
	n := int64(100)
	x := e.start(context.Background(), shell.ExecRequest{Command: "head -c 1000 /dev/zero | tr '\\0' x", Expiry: shell.ExpiryNone, StdoutMaxBytes: &n})
	done(t, x, 20*time.Second)
	r := x.ReadOutput()
	if !r.Lossy || r.Delta != strings.Repeat("x", 100) || r.StdoutSpillPath == "" || r.StderrSpillPath != "" {
		t.Fatalf("lossy read: lossy %v, %d bytes, spill %q/%q; want lossy, the retained tail, the stdout spill file", r.Lossy, len(r.Delta), r.StdoutSpillPath, r.StderrSpillPath)
	}
	if data, err := os.ReadFile(r.StdoutSpillPath); err != nil || len(data) != 1000 {
		t.Errorf("spill file %s: %d bytes, %v", r.StdoutSpillPath, len(data), err)
	}
	if r := x.ReadOutput(); r.Lossy || r.Delta != "" {
		t.Errorf("second read %+v", r)
	}
}

func (k *kit) utf8(t *testing.T) {
	e := k.env(t, nil)
	gate, open := e.gate("gate")
	x := e.start(context.Background(), shell.ExecRequest{
		Command: `printf 'a\303'; printf 'b\342\202' >&2; while [ ! -e ` + proctest.Quote(gate) + ` ]; do sleep 0.01; done; printf '\251z'; printf '\254c' >&2`,
		Expiry:  shell.ExpiryNone,
	})
	var first strings.Builder
	if !proctest.Until(20*time.Second, func() bool {
		first.WriteString(x.ReadOutput().Delta)
		return strings.Contains(first.String(), "a") && strings.Contains(first.String(), "b")
	}) {
		t.Fatalf("first reads %q", first.String())
	}
	// The two streams may arrive in either order across reads; what matters is that no
	// read carried the first byte of a character whose rest was not written yet.
	if got := first.String(); !utf8.ValidString(got) || strings.ContainsAny(got, "\u00e9\u20ac") {
		t.Errorf("reads while running %q; want the partial characters held back", got)
	}
	open()
	done(t, x, 20*time.Second)
	if r := x.ReadOutput(); r.Delta != "\u00e9z\n[stderr]\n\u20acc" {
		t.Errorf("read after the end %q; want the completed characters", r.Delta)
	}
	n := int64(1001) // odd: the cut falls inside a two-byte character
	res := e.run(shell.ExecRequest{Command: `for i in $(seq 1 2000); do printf '\303\251'; done`, StdoutMaxBytes: &n})
	if !res.Stdout.Truncated || !utf8.ValidString(res.Stdout.Text) || res.Stdout.Text != strings.Repeat("é", 500) {
		t.Errorf("truncated tail: valid %v, %d bytes; want 500 whole characters", utf8.ValidString(res.Stdout.Text), len(res.Stdout.Text))
	}
}

func (k *kit) spawnFailure(t *testing.T) {
	e := k.env(t, nil)
	missing := e.dir + "/missing"
	// Foreground: an infrastructure error naming ENOENT.
	x, err := e.ex.Execute(context.Background(), e.spec(shell.ExecRequest{Command: "echo hi", Workdir: missing}))
	if err != nil {
		t.Fatalf("Execute with a missing workdir: %v (a failed start belongs to the handle)", err)
	}
	done(t, x, 20*time.Second)
	if _, err := x.Result(context.Background()); err == nil || !strings.Contains(err.Error(), "ENOENT") || !strings.Contains(err.Error(), "spawn failed") {
		t.Errorf("Result with a missing workdir: %v; want a spawn failure naming ENOENT", err)
	}
	// Background: the failure once, as a [stderr] section; settled killed.
	x, err = e.ex.Execute(context.Background(), e.spec(shell.ExecRequest{Command: "echo hi", Workdir: missing, Expiry: shell.ExpiryNone}))
	if err != nil {
		t.Fatal(err)
	}
	done(t, x, 20*time.Second)
	r := x.ReadOutput()
	if !strings.HasPrefix(r.Delta, "[stderr]\n") || !strings.Contains(r.Delta, "spawn failed") || !strings.HasSuffix(r.Delta, "\n") || r.Lossy {
		t.Errorf("first read of a failed start: %+v; want \"[stderr]\\nspawn failed: …\\n\"", r)
	}
	if r := x.ReadOutput(); r.Delta != "" {
		t.Errorf("second read of a failed start: %+v", r)
	}
	if ex, ok := x.Exit(); !ok || ex.State() != proc.Killed || ex.Code != nil {
		t.Errorf("exit of a failed start %+v", ex)
	}
	if x.Kill() {
		t.Error("Kill of a failed start returned true")
	}
}

func (k *kit) environment(t *testing.T) {
	e := k.env(t, nil)
	res := e.run(shell.ExecRequest{
		Command: `echo "$KIT_VAR|$DSH_KIT|$NO_COLOR|$TERM|$PAGER|$GIT_PAGER|$GIT_TERMINAL_PROMPT"`,
		Env:     map[string]string{"KIT_VAR": "plain", "TERM": "xterm"},
		DshEnv:  map[string]string{"DSH_KIT": "managed"},
	})
	if res.Stdout.Text != "plain|managed|1|xterm|cat|cat|0\n" {
		t.Errorf("environment %q; want the request's Env over the fixed variables and the DSH_* snapshot", res.Stdout.Text)
	}
	res = e.run(shell.ExecRequest{Command: `echo "$DSH_KIT"`, Env: map[string]string{"DSH_KIT": "spoofed"}, DshEnv: map[string]string{"DSH_KIT": "managed"}})
	if res.Stdout.Text != "managed\n" {
		t.Errorf("DSH_KIT %q; the managed snapshot must win over ordinary variables", res.Stdout.Text)
	}
	stdin := "line one\nline two\n"
	if res := e.run(shell.ExecRequest{Command: "cat", Stdin: &stdin}); res.Stdout.Text != stdin {
		t.Errorf("stdin: %q", res.Stdout.Text)
	}
	if res := e.run(shell.ExecRequest{Command: "cat; echo end"}); res.Stdout.Text != "end\n" {
		t.Errorf("no stdin: %q; want an empty input, not a wait", res.Stdout.Text)
	}
	if res := e.run(shell.ExecRequest{Command: "pwd -P"}); strings.TrimSpace(res.Stdout.Text) == "" || code(res) != "0" {
		t.Errorf("pwd: %+v", res)
	}
}

func (k *kit) concurrency(t *testing.T) {
	e := k.env(t, nil)
	const n = 20
	xs := make([]shell.Execution, n)
	for i := range xs {
		xs[i] = e.start(context.Background(), shell.ExecRequest{Command: "echo " + strconv.Itoa(i) + "; echo e" + strconv.Itoa(i) + " >&2"})
	}
	for i, x := range xs {
		res, err := x.Result(context.Background())
		if err != nil || res.Stdout.Text != strconv.Itoa(i)+"\n" || res.Stderr.Text != "e"+strconv.Itoa(i)+"\n" || code(res) != "0" {
			t.Errorf("call %d: %+v, %v", i, res, err)
		}
	}
}

// runningLocally reports whether a live process on this host has marker in its command
// line.
func runningLocally(marker string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), marker) && !proctest.Gone(pid) {
			return true
		}
	}
	return false
}
