package bashsandbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/shell"
)

// bashDetail is the status detail of the stack's executor row.
func bashDetail(t *testing.T, st *stack) string {
	t.Helper()
	for _, row := range st.rt.Status().Rows {
		if row.ID == "bash" {
			return row.Detail
		}
	}
	t.Fatal("no bash row")
	return ""
}

// landlockOnlyMissing is what the Landlock-only backend lacks on this host.
func landlockOnlyMissing(userns bool) []string {
	return bashsandbox.Missing(bashsandbox.BackendLandlock, bashsandbox.KernelABI(), bashsandbox.NetworkDeny, userns)
}

// The Landlock-only fallback, both ways it comes about: a host without user namespaces
// (simulated: the probe reports none) and `namespaces: off`. Enforcement is "partial",
// status names each missing guarantee, and commands are still confined: no write
// outside the writable set, no socket outside, no capability.
func TestFallbackLandlockOnly(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func() (restore func())
		config map[string]any
		why    string
		userns bool
	}{
		{"host without user namespaces", func() func() { return bashsandbox.ForceNoNamespaces("forced by the test") }, nil,
			"user namespaces unavailable: forced by the test", false},
		{"namespaces off", func() func() { return func() {} }, map[string]any{"namespaces": "off"},
			"namespaces are off in the configuration", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			restore := tc.setup()
			defer restore()
			cfg := map[string]any{"defaultMode": "workspace-write"}
			for k, v := range tc.config {
				cfg[k] = v
			}
			st := newStack(t, stackSetup{bashConfig: cfg})
			missing := landlockOnlyMissing(tc.userns)
			want := fmt.Sprintf("sandbox: Landlock ABI %d only (%s) + seccomp, default mode workspace-write, network deny, enforcement partial; missing: %s",
				bashsandbox.KernelABI(), tc.why, strings.Join(missing, "; ")) + bashsandbox.DefaultLimitsDetail(false)
			if got := bashDetail(t, st); got != want {
				t.Fatalf("status detail:\n got %q\nwant %q", got, want)
			}
			if !slices.Contains(missing, bashsandbox.MissingProtectedPaths) || !slices.Contains(missing, bashsandbox.MissingSpillPrivacy) {
				t.Fatalf("missing %q", missing)
			}
			ws := workspace(t)
			s := session("fallback", ws)
			res := st.bash(t, s, `echo data > f && cat f && echo "$TMPDIR" > tmpdir && echo t > "$TMPDIR/t" && cat "$TMPDIR/t"`)
			expect(t, res, "data\nt\n", false)
			if got := sandboxOf(t, res); got != sandboxJSON("workspace-write", false, "partial", false) {
				t.Fatalf("sandbox value %s", got)
			}
			tmpdir, _ := os.ReadFile(filepath.Join(ws, "tmpdir"))
			if !strings.HasPrefix(string(tmpdir), os.TempDir()) || strings.TrimSpace(string(tmpdir)) == os.TempDir() {
				t.Fatalf("TMPDIR %q is not a private directory", tmpdir)
			}
			// Without a mount namespace the spill files are where dsh writes them
			// (every session's: MissingSpillPrivacy): the session reads its own, read-only.
			spill := st.bash(t, s, "seq 1 30000").Value.(toolbash.ForegroundValue).Stdout.SpillPath
			if spill == "" {
				t.Fatal("no spill file")
			}
			expect(t, st.bash(t, s, "seq 1 30000 | cmp - "+spill+" && echo same"), "same\n", false)
			if got := attackLine(t, st, s, "write", spill); got != "permission denied" {
				t.Errorf("writing the spill file: %q", got)
			}
			// The host's shared /tmp and everything outside the writable set stay
			// read-only (Landlock), sockets are filtered (seccomp), capabilities gone.
			host := filepath.Join(os.TempDir(), fmt.Sprintf("dsh-fallback-%d", os.Getpid()))
			expect(t, st.bash(t, s, "touch "+host), deniedText("touch: cannot touch '"+host+"': Permission denied", "workspace-write"), false)
			if exists(host) {
				t.Fatal("wrote the host's /tmp")
			}
			for _, tc := range []struct {
				op   string
				args []string
				want string
			}{
				{"socket", []string{"1", "1", "0"}, "permission denied"},                                   // AF_UNIX
				{"socket", []string{"2", "2", "0"}, "permission denied"},                                   // UDP: no network namespace
				{"socket", []string{"17", "3", "0"}, "permission denied"},                                  // AF_PACKET
				{"sethostname", nil, "operation not permitted"},                                            // no capability
				{"read", []string{"/proc/" + strconv.Itoa(os.Getpid()) + "/environ"}, "permission denied"}, // dsh: Landlock and not dumpable
				{"kill", []string{strconv.Itoa(os.Getpid())}, "operation not permitted"},                   // Landlock's signal scope
			} {
				if got := attackLine(t, st, s, tc.op, tc.args...); got != tc.want {
					t.Errorf("%s %q: %q, want %q", tc.op, tc.args, got, tc.want)
				}
			}
			if os.Geteuid() == 0 {
				expect(t, st.bash(t, s, `grep -E '^Cap(Eff|Bnd):' /proc/self/status | tr -s '\t ' ' '`), "CapEff: 0000000000000000\nCapBnd: 0000000000000000\n", false)
			}
			// A protected path inside the workspace cannot be kept read-only:
			// workspace-write calls fail closed, naming it and the root; read-only ones
			// still run.
			if err := os.Mkdir(filepath.Join(ws, ".git"), 0o755); err != nil {
				t.Fatal(err)
			}
			marker := filepath.Join(ws, "marker")
			expect(t, st.bash(t, s, "touch "+marker), `Error: bash-sandbox: cannot protect "`+ws+`/.git" inside the writable root "`+ws+
				`": this host's sandbox is Landlock-only (no mount namespace), which cannot make part of a writable root read-only; refusing to run workspace-write commands while it is there`, true)
			if exists(marker) {
				t.Fatal("the command ran")
			}
			ro := &container.Session{ID: "fallback-ro", Cwd: ws, SandboxMode: shell.ModeReadOnly}
			expect(t, st.bash(t, ro, "cat f"), "data\n", false)
		})
	}
}

// A protected path inside a configured writable root, under a backend that cannot
// protect it: the executor refuses to start, naming the path and the root; with the
// namespace backend the same configuration starts and keeps the path read-only.
func TestFallbackRefusesUnprotectableConfig(t *testing.T) {
	extra := outsideTempDir(t, "dsh-sandbox-extra-")
	profile := filepath.Join(extra, "profile.yaml")
	if err := os.WriteFile(profile, []byte("plugins: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	compose := func(t *testing.T, namespaces string) *stack {
		rt := container.NewRuntime(catalog(t), container.Options{Logger: quietLogger()})
		st := &stack{rt: rt, root: canonTempDir(t), home: t.TempDir()}
		t.Cleanup(rt.Close)
		rows := stackRows(stackSetup{bashConfig: map[string]any{"defaultMode": "workspace-write", "writableRoots": []any{extra}, "namespaces": namespaces}}, st.root, st.home)
		if err := rt.ComposeFiles("unprotectable", []string{profile}, rows); err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := compose(t, "off")
	for _, row := range st.rt.Status().Rows {
		if row.ID != "bash" {
			continue
		}
		want := `bash-sandbox: cannot protect "` + profile + `" inside the writable root "` + extra + `": this host's sandbox is Landlock-only (no mount namespace), which cannot make part of a writable root read-only; refusing to run workspace-write commands while it is there`
		if row.State != container.StateFailed || row.Error != want {
			t.Fatalf("bash row %s: %q, want failed with %q", row.State, row.Error, want)
		}
	}
	st = compose(t, "auto")
	st.lookup(t)
	ws := workspace(t)
	res := st.bash(t, session("protected-extra", ws), "echo x > "+profile)
	expect(t, res, deniedText("bash: line 1: "+profile+": Read-only file system", "workspace-write"), false)
	expect(t, st.bash(t, session("protected-extra", ws), "echo y > "+extra+"/other && cat "+extra+"/other"), "y\n", false)
}

// recorder keeps the log records of a stack.
type recorder struct {
	mu      sync.Mutex
	records []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec.Level.String()+" "+rec.Message)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.records {
		if strings.Contains(rec, "widens confinement") {
			out = append(out, rec)
		}
	}
	r.records = nil
	return out
}

// A reload that widens confinement is applied and logged at WARN, once per widening:
// a wider defaultMode, network deny → allow, an added writable root, namespaces off,
// the executor swapped for one that does not confine. Narrowing logs nothing.
func TestReloadWideningIsLogged(t *testing.T) {
	rec := &recorder{}
	rt := container.NewRuntime(catalog(t), container.Options{Logger: slog.New(rec)})
	root, home := canonTempDir(t), t.TempDir()
	extra := outsideTempDir(t, "dsh-sandbox-extra-")
	t.Cleanup(rt.Close)
	compose := func(executor string, cfg map[string]any) {
		t.Helper()
		if err := rt.Compose("widen", stackRows(stackSetup{executor: executor, bashConfig: cfg}, root, home)); err != nil {
			t.Fatal(err)
		}
	}
	compose("", nil)
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("the first composition logged %q", got)
	}
	for _, step := range []struct {
		executor string
		cfg      map[string]any
		want     []string
	}{
		{"", map[string]any{"defaultMode": "workspace-write"}, []string{"WARN profile reload widens confinement: bash-sandbox defaultMode read-only → workspace-write"}},
		{"", map[string]any{"defaultMode": "workspace-write", "network": "allow", "writableRoots": []any{extra}, "namespaces": "off"}, []string{
			"WARN profile reload widens confinement: bash-sandbox network deny → allow",
			"WARN profile reload widens confinement: bash-sandbox writable root added: " + extra,
			"WARN profile reload widens confinement: bash-sandbox namespaces auto → off (Landlock only)",
		}},
		{"", map[string]any{"defaultMode": "read-only"}, nil}, // narrower
		{"bash-local", nil, []string{"WARN profile reload widens confinement: the executor no longer confines commands (it confined them in read-only mode by default)"}},
		{"", nil, nil},
	} {
		compose(step.executor, step.cfg)
		if got := rec.take(); !slices.Equal(got, step.want) {
			t.Fatalf("%s %v: logged %q, want %q", step.executor, step.cfg, got, step.want)
		}
	}
}

// If the box dies, every command in it dies too (it is the init of their
// PID namespace), and their handles settle killed at once, with a note saying why; the
// session's next call gets a new sandbox.
func TestBoxDeath(t *testing.T) {
	st := newStack(t, stackSetup{bashConfig: map[string]any{"graceMs": 60000}})
	ws := workspace(t)
	s := session("death", ws)
	res := st.bash(t, s, "echo started; exec sleep 300", "run_in_background", true)
	id := strings.TrimPrefix(res.Text, "started background job ")
	waitFor(t, "the job to start", func() bool {
		return strings.HasPrefix(st.call(t, s, "job_output", `{"job_id":"`+id+`","wait":false}`).Text, "started")
	})
	sup, _ := container.Lookup(st.rt, subprocess.Service)
	pids := bashsandbox.BoxPids(sup)
	if len(pids) != 1 {
		t.Fatalf("boxes: %v", pids)
	}
	start := time.Now()
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	out := st.call(t, s, "job_output", `{"job_id":"`+id+`","wait":true,"timeout_ms":10000}`).Text
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the job settled %v after its sandbox died", took)
	}
	want := "[stderr]\n[subprocess: bash-sandbox: the session sandbox (pid " + strconv.Itoa(pids[0]) + ") ended; the command was killed with it]\n[status: killed, signal: SIGKILL]"
	if out != want {
		t.Fatalf("job output:\n got %q\nwant %q", out, want)
	}
	expect(t, st.bash(t, s, "echo again"), "again\n", false)
	if now := bashsandbox.BoxPids(sup); len(now) != 1 || now[0] == pids[0] {
		t.Fatalf("boxes after the death: %v", now)
	}
}

// The subset of the attack tests that an unprivileged user runs too: this test binary
// again, as uid 65534 (nobody) through setpriv, with a home and temp dir of its own.
// (Run as root, as CI does; an unprivileged run covers this by itself.)
func TestUnprivileged(t *testing.T) {
	if os.Getenv("DSH_SANDBOX_UNPRIVILEGED") != "" {
		t.Skip("already the unprivileged run")
	}
	if os.Geteuid() != 0 {
		t.Skip("not root: this run is the unprivileged one")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv is not installed")
	}
	// Outside /tmp: the box masks the host's /tmp, and HOME (where the tests put
	// workspaces and the attack helper) must stay visible.
	dir, err := os.MkdirTemp("/var/tmp", "dsh-sandbox-nobody-")
	if err != nil {
		t.Skipf("no directory for the unprivileged run outside /tmp: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, d := range []string{dir, dir + "/home", dir + "/tmp"} {
		os.MkdirAll(d, 0o755)
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	attackHelper, err := buildHelper(dir)
	if err != nil {
		t.Skip(err)
	}
	bin := filepath.Join(dir, "bash-sandbox.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", "--",
		bin, "-test.run", "^(TestConfined|TestStack(ReadOnly|WorkspaceWrite|Network)|TestFallbackLandlockOnly|TestBoxDeath|TestBoxVerdict)", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir + "/home", "TMPDIR=" + dir + "/tmp", "LC_ALL=C", "DSH_SANDBOX_UNPRIVILEGED=1", "DSH_SANDBOX_HELPER=" + attackHelper}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "PASS") {
		t.Fatalf("the unprivileged run failed: %v\n%s", err, out)
	}
}
