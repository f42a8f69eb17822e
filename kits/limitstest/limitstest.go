// Package limitstest checks a local executor's resource limits (`limits:`) through the
// real bash tool: it composes subprocess, the executor's plugin and the tool (tools,
// prompt, shell-env, jobs, tool-bash) and runs commands that reach each limit, reading
// what the model reads — the markers, the typed value's usage and limit, a job's
// outcome. bash-local and bash-sandbox both run it (Run); tests only.
package limitstest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/jobs"
	"github.com/dsh-dev/dsh/plugins/prompt"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// Target is the executor under test.
type Target struct {
	// Plugin is the executor's plugin; Name the name its rows use.
	Plugin container.Plugin
	Name   string
	// Config is the rest of its row's configuration (limits are added per test).
	Config map[string]any
	// Workspace returns a session's working directory (a sandbox's workspace).
	Workspace func(t testing.TB) string
	// Subprocess is the subprocess row's configuration (a spill root…).
	Subprocess map[string]any
}

// Harness is the target composed with the bash tool.
type Harness struct {
	t   testing.TB
	Rt  *container.Runtime
	reg *tools.Registry
	ws  string
}

// Compose composes target with limits as its row's `limits:` and fails the test unless
// every row is active.
func Compose(t testing.TB, target Target, limits map[string]any) *Harness {
	t.Helper()
	h, err := TryCompose(t, target, limits)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range h.Rt.Status().Rows {
		if row.State != container.StateActive {
			t.Fatalf("row %s is %s: %s", row.ID, row.State, row.Error)
		}
	}
	return h
}

// TryCompose composes target with limits and returns the composition's error (a row
// that failed is in the runtime's status).
func TryCompose(t testing.TB, target Target, limits map[string]any) (*Harness, error) {
	t.Helper()
	cat, err := container.NewCatalog(subprocess.Plugin, tools.Plugin, prompt.Plugin, shellenv.Plugin, jobs.Plugin, toolbash.Plugin, target.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(rt.Close)
	sub := map[string]any{"spillRoot": t.TempDir()}
	for k, v := range target.Subprocess {
		sub[k] = v
	}
	cfg := map[string]any{}
	for k, v := range target.Config {
		cfg[k] = v
	}
	if limits != nil {
		cfg["limits"] = limits
	}
	h := &Harness{t: t, Rt: rt, ws: target.Workspace(t)}
	err = rt.Compose("limitstest", []container.Row{
		{ID: "subprocess", Plugin: "subprocess", Config: sub},
		{ID: "tools", Plugin: "tools"},
		{ID: "prompt", Plugin: "prompt"},
		{ID: "shell-env", Plugin: "shell-env", Config: map[string]any{"dshHome": t.TempDir()}},
		{ID: "jobs", Plugin: "jobs"},
		{ID: "tool-bash", Plugin: "tool-bash"},
		{ID: "bash", Plugin: target.Name, Config: cfg},
	})
	if reg, ok := container.Lookup[*tools.Registry](rt, tools.Service); ok {
		h.reg = reg
	}
	return h, err
}

// Session is a session of the harness, working in its workspace.
func (h *Harness) Session(id string) *container.Session {
	return &container.Session{ID: id, Cwd: h.ws}
}

// Call calls tool with args in session s.
func (h *Harness) Call(s *container.Session, tool string, args map[string]any) tools.Result {
	h.t.Helper()
	raw, _ := json.Marshal(args)
	return h.reg.Call(context.Background(), tool, raw, s)
}

// Bash runs command in session s (extra: more arguments).
func (h *Harness) Bash(s *container.Session, command string, extra map[string]any) tools.Result {
	h.t.Helper()
	args := map[string]any{"command": command, "description": "Run a command under limits"}
	for k, v := range extra {
		args[k] = v
	}
	return h.Call(s, "bash", args)
}

// Description is the bash tool's description.
func (h *Harness) Description() string {
	tl, _ := h.reg.Tool("bash")
	return tl.Description
}

// Value is a foreground result's typed value.
func Value(t testing.TB, r tools.Result) toolbash.ForegroundValue {
	t.Helper()
	v, ok := r.Value.(toolbash.ForegroundValue)
	if !ok {
		t.Fatalf("not a foreground value: %#v (text %q)", r.Value, r.Text)
	}
	return v
}

// StartJob starts command as a background job of s and returns its id.
func (h *Harness) StartJob(s *container.Session, command string) string {
	h.t.Helper()
	res := h.Bash(s, command, map[string]any{"run_in_background": true})
	id, ok := strings.CutPrefix(res.Text, "started background job ")
	if !ok || res.IsError {
		h.t.Fatalf("background start of %q: %q", command, res.Text)
	}
	return id
}

// JobOutput waits for the output of job id until it contains want, and returns it all.
func (h *Harness) JobOutput(s *container.Session, id, want string) string {
	h.t.Helper()
	var got strings.Builder
	proctest.WaitFor(h.t, 60*time.Second, "job "+id+" output "+want, func() bool {
		got.WriteString(h.Call(s, "job_output", map[string]any{"job_id": id, "wait": true, "timeout_ms": 2000}).Text)
		return strings.Contains(got.String(), want)
	})
	return got.String()
}

// Perl programs that hold memory: alloc allocates n MiB and exits (bash execs it: the
// command's leader), hold allocates n MiB, says "held" and sleeps.
// (`$x = "a"; $x x= n` allocates n bytes once; `$x = "a" x n` would build it twice.)
func alloc(mib string) string { return `perl -e '$x = "a"; $x x= (` + mib + ` << 20)'` }
func hold(mib string) string {
	return `perl -e '$x = "a"; $x x= (` + mib + ` << 20); $| = 1; print "held\n"; sleep 60'`
}

// Run checks the limits of target, one subtest per limit: the documented markers and typed
// values for memory, processes and the session's shared memory, a job killed by its
// memory limit, the CPU quota's accounting, and the description naming the limits.
func Run(t *testing.T, target Target) {
	t.Run("Memory", func(t *testing.T) { memory(t, target) })
	t.Run("Processes", func(t *testing.T) { processes(t, target) })
	t.Run("SessionMemory", func(t *testing.T) { sessionMemory(t, target) })
	t.Run("JobMemory", func(t *testing.T) { jobMemory(t, target) })
	t.Run("CPUs", func(t *testing.T) { cpus(t, target) })
}

// A command that allocates past `memory` is killed; the result says so.
func memory(t *testing.T, target Target) {
	h := Compose(t, target, map[string]any{"memory": "64MiB"})
	s := h.Session("limits-memory")
	if d := h.Description(); !strings.Contains(d, "each command may use at most 64 MiB of memory") {
		t.Errorf("the description does not name the limit:\n%s", d)
	}
	res := h.Bash(s, alloc("200"), nil)
	if want := "(no output)\n[killed: memory limit of 64 MiB reached]\n[killed by signal: SIGKILL]"; res.Text != want {
		t.Fatalf("text %q, want %q", res.Text, want)
	}
	v := Value(t, res)
	if v.Limit != "memory" || v.Usage == nil || v.Usage.PeakMemoryBytes == nil || *v.Usage.PeakMemoryBytes < 60<<20 {
		b, _ := json.Marshal(v)
		t.Fatalf("typed value %s: want limit memory and a peak near 64 MiB", b)
	}
	if b, _ := json.Marshal(v); !strings.Contains(string(b), `"limit":"memory"`) {
		t.Fatalf("typed value %s", b)
	}
	// What stays below the limit runs, and reports its usage without a limit.
	res = h.Bash(s, alloc("16")+` && echo ok`, nil)
	if v := Value(t, res); res.Text != "ok\n" || v.Limit != "" || v.Usage == nil || v.Usage.CPUMs == nil {
		b, _ := json.Marshal(v)
		t.Fatalf("below the limit: %q %s", res.Text, b)
	}
}

// A fork loop past `processes` has forks refused; the result says so.
func processes(t *testing.T, target Target) {
	h := Compose(t, target, map[string]any{"processes": 50})
	s := h.Session("limits-processes")
	// (bash retries a refused fork, and may give up on one: "fork: Interrupted system
	// call" when a child's exit interrupts the retry.)
	res := h.Bash(s, `for i in $(seq 80); do sleep 0.3 & done; wait`, nil)
	if !strings.Contains(res.Text, "\n[process limit of 50 reached: new processes were refused]") ||
		!strings.Contains(res.Text, "bash: fork: ") {
		t.Fatalf("text %q", res.Text)
	}
	if v := Value(t, res); v.Limit != "processes" {
		t.Fatalf("limit %q", v.Limit)
	}
	if res := h.Bash(s, "echo ok", nil); res.Text != "ok\n" {
		t.Fatalf("after the refusals: %q", res.Text)
	}
}

// Two commands of one session share `sessionMemory`: one that fits alone is killed
// while a job of the session holds memory, and the marker names the session's limit.
// (The sizes leave the OOM killer no doubt: the command is the session's largest
// process when the limit is reached, a box included.)
func sessionMemory(t *testing.T, target Target) {
	h := Compose(t, target, map[string]any{"sessionMemory": "128MiB"})
	s := h.Session("limits-session")
	if res := h.Bash(s, alloc("90")+` && echo fits`, nil); res.Text != "fits\n" {
		t.Fatalf("alone: %q", res.Text)
	}
	job := h.StartJob(s, hold("40"))
	h.JobOutput(s, job, "held")
	res := h.Bash(s, alloc("90"), nil)
	if want := "(no output)\n[killed: session memory limit of 128 MiB reached]\n[killed by signal: SIGKILL]"; res.Text != want {
		t.Fatalf("with the job holding 40 MiB: %q, want %q", res.Text, want)
	}
	if v := Value(t, res); v.Limit != "sessionMemory" {
		t.Fatalf("limit %q", v.Limit)
	}
	// Another session has a budget of its own.
	if res := h.Bash(h.Session("limits-session-2"), alloc("90")+` && echo fits`, nil); res.Text != "fits\n" {
		t.Fatalf("another session: %q", res.Text)
	}
	h.Call(s, "job_kill", map[string]any{"job_id": job})
}

// A background job killed by its memory limit is killed, with the marker's words.
func jobMemory(t *testing.T, target Target) {
	h := Compose(t, target, map[string]any{"memory": "64MiB"})
	s := h.Session("limits-job")
	job := h.StartJob(s, alloc("200"))
	out := h.JobOutput(s, job, "[status:")
	if !strings.HasSuffix(out, "[status: killed, killed: memory limit of 64 MiB reached]") {
		t.Fatalf("job output %q", out)
	}
}

// `cpus` throttles a busy loop; its usage reports the CPU time (the figure is logged:
// BenchmarkCPUQuota measures it).
func cpus(t *testing.T, target Target) {
	h := Compose(t, target, map[string]any{"cpus": 0.5})
	ms, wall := BusyLoop(t, h, h.Session("limits-cpus"), 2*time.Second)
	t.Logf("cpus 0.5: a busy loop used %d ms of CPU in %d ms (%.2f of a core)", ms, wall, float64(ms)/float64(wall))
	if ms <= 0 || float64(ms) > 0.8*float64(wall) {
		t.Fatalf("a busy loop under cpus 0.5 used %d ms of CPU in %d ms", ms, wall)
	}
}

// BusyLoop runs a busy loop of about d in s and returns the CPU time its usage reports
// and the wall time it took, in milliseconds.
func BusyLoop(t testing.TB, h *Harness, s *container.Session, d time.Duration) (cpuMs, wallMs int64) {
	t.Helper()
	start := time.Now()
	res := h.Bash(s, `end=$((SECONDS+`+itoa(int64(d/time.Second))+`)); while [ $SECONDS -lt $end ]; do :; done`, nil)
	wall := time.Since(start).Milliseconds()
	v := Value(t, res)
	if v.Usage == nil || v.Usage.CPUMs == nil {
		t.Fatalf("no CPU usage: %q", res.Text)
	}
	return *v.Usage.CPUMs, wall
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// ComposeWithoutControllers composes target, with limits, over a Supervisor whose probe
// is pointed at an empty hierarchy root (subprocess.Options.CgroupRoot): a host with
// neither cgroup v2 nor v1 controllers. It returns the runtime, whose rows may have
// failed.
func ComposeWithoutControllers(t *testing.T, target Target, limits map[string]any) *container.Runtime {
	t.Helper()
	sup := subprocess.New(subprocess.Options{SpillRoot: t.TempDir(), CgroupRoot: t.TempDir(), NoCrashCleanup: true})
	t.Cleanup(sup.Close)
	host := container.Define(container.Declaration[container.NoConfig]{
		Name:    "subprocess-without-controllers",
		Provide: container.Keys{subprocess.Service},
		Apply: func(a *container.Activation, _ container.NoConfig) error {
			return subprocess.Service.Provide(a, sup)
		},
	})
	cat, err := container.NewCatalog(host, prompt.Plugin, target.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(rt.Close)
	cfg := map[string]any{}
	for k, v := range target.Config {
		cfg[k] = v
	}
	if limits != nil {
		cfg["limits"] = limits
	}
	_ = rt.Compose("limitstest", []container.Row{
		{ID: "subprocess", Plugin: "subprocess-without-controllers"},
		{ID: "prompt", Plugin: "prompt"},
		{ID: "bash", Plugin: target.Name, Config: cfg},
	})
	return rt
}

// Row is the status of rt's executor row.
func Row(t testing.TB, rt *container.Runtime) container.RowStatus {
	t.Helper()
	for _, row := range rt.Status().Rows {
		if row.ID == "bash" {
			return row
		}
	}
	t.Fatal("no bash row in the status")
	return container.RowStatus{}
}

// WithoutController checks that the limit key (of value) on a host without its
// controller fails the executor's row with the documented message.
func WithoutController(t *testing.T, target Target, key string, value any) {
	t.Helper()
	rt := ComposeWithoutControllers(t, target, map[string]any{key: value})
	ctl := map[string]string{"memory": "memory", "sessionMemory": "memory", "processes": "pids", "sessionProcesses": "pids", "cpus": "cpu", "sessionCpus": "cpu"}[key]
	want := target.Name + ": limits." + key + " cannot be enforced on this host: no " + ctl +
		" controller: cgroup v2 is not in use (no cgroup2 mount), and no cgroup v1 " + ctl + " hierarchy is mounted"
	if row := Row(t, rt); row.State != container.StateFailed || row.Error != want {
		t.Fatalf("row %s: %s %q, want failed with %q", row.ID, row.State, row.Error, want)
	}
}
