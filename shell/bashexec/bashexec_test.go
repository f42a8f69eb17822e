package bashexec_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
	"github.com/dsh-dev/dsh/shell"
	"github.com/dsh-dev/dsh/shell/bashexec"
)

func TestMain(m *testing.M) { proctest.Main(m) }

func newExecutor(t *testing.T, cfg bashexec.Config, opts bashexec.Options) *bashexec.Executor {
	t.Helper()
	sup := subprocess.New(subprocess.Options{SpillRoot: t.TempDir()})
	t.Cleanup(sup.Close)
	if opts.Name == "" {
		opts.Name = "bash-local"
	}
	ex, err := bashexec.New(sup.Spawner(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

func f64(v float64) *float64 { return &v }

func TestDefaultConfig(t *testing.T) {
	c := bashexec.DefaultConfig()
	if c.Cwd != "" || c.TimeoutMs != 120000 || c.MaxTimeoutMs != 600000 || c.MaxOutputBytes != 64000 ||
		c.MaxSpillBytes != 67108864 || c.GraceMs != 3000 {
		t.Errorf("DefaultConfig() = %+v", c)
	}
	if err := c.Check(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestConfigCheckMessages(t *testing.T) {
	keys := map[string]func(*bashexec.Config, float64){
		"timeoutMs":      func(c *bashexec.Config, v float64) { c.TimeoutMs = v },
		"maxTimeoutMs":   func(c *bashexec.Config, v float64) { c.MaxTimeoutMs = v },
		"maxOutputBytes": func(c *bashexec.Config, v float64) { c.MaxOutputBytes = v },
		"maxSpillBytes":  func(c *bashexec.Config, v float64) { c.MaxSpillBytes = v },
		"graceMs":        func(c *bashexec.Config, v float64) { c.GraceMs = v },
	}
	for key, set := range keys {
		for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1)} {
			c := bashexec.DefaultConfig()
			set(&c, bad)
			want := key + " must be a positive finite number"
			if err := c.Check(); err == nil || err.Error() != want {
				t.Errorf("%s=%v: %v, want %q", key, bad, err, want)
			}
		}
	}
	c := bashexec.DefaultConfig()
	c.GraceMs = 2147483648
	if err := c.Check(); err == nil || err.Error() != "graceMs must be no greater than 2147483647" {
		t.Errorf("graceMs too large: %v", err)
	}
	c.GraceMs = 2147483647
	if err := c.Check(); err != nil {
		t.Errorf("graceMs at the limit: %v", err)
	}
	// New names the executor in front of Check's messages (the container does the same
	// for a plugin's config).
	sup := subprocess.New(subprocess.Options{DisableCgroups: true})
	defer sup.Close()
	for _, name := range []string{"bash-local", "bash-sandbox"} {
		if _, err := bashexec.New(sup.Spawner(), bashexec.Config{}, bashexec.Options{Name: name}); err == nil ||
			err.Error() != name+": timeoutMs must be a positive finite number" {
			t.Errorf("New with a zero config: %v", err)
		}
	}
}

func TestResolve(t *testing.T) {
	wd, _ := os.Getwd()
	cwd := t.TempDir()
	cfg := bashexec.DefaultConfig()
	plain := newExecutor(t, cfg, bashexec.Options{})
	cfg.Cwd = cwd
	withCwd := newExecutor(t, cfg, bashexec.Options{})
	cfg.Cwd = "rel/dir"
	relCwd := newExecutor(t, cfg, bashexec.Options{})

	t.Run("defaults", func(t *testing.T) {
		spec, err := plain.Resolve(shell.ExecRequest{Command: "echo hi"})
		if err != nil {
			t.Fatal(err)
		}
		want := shell.ExecSpec{Command: "echo hi", Workdir: wd, TimeoutMs: 120000, StdoutMaxBytes: 64000, Expiry: shell.ExpiryKill}
		if spec.Command != want.Command || spec.Workdir != want.Workdir || spec.TimeoutMs != want.TimeoutMs ||
			spec.StdoutMaxBytes != want.StdoutMaxBytes || spec.Expiry != want.Expiry ||
			spec.Stdin != nil || spec.Env != nil || spec.DshEnv != nil || spec.Sandbox != nil {
			t.Errorf("spec = %+v\nwant   %+v", spec, want)
		}
	})
	t.Run("timeouts", func(t *testing.T) {
		for _, c := range []struct {
			in   float64
			want int64
		}{{1, 1}, {1500, 1500}, {1500.2, 1501}, {600000, 600000}, {600001, 600000}, {1e300, 600000}, {math.Inf(1), 600000}} {
			spec, err := plain.Resolve(shell.ExecRequest{Command: "true", TimeoutMs: f64(c.in)})
			if err != nil || spec.TimeoutMs != c.want {
				t.Errorf("timeoutMs %v → %d, %v; want %d", c.in, spec.TimeoutMs, err, c.want)
			}
		}
		for _, c := range []struct {
			in   float64
			want string
		}{
			{math.NaN(), "bash-local: request.timeoutMs must be a positive number, got NaN"},
			{0, "bash-local: request.timeoutMs must be a positive number, got 0"},
			{-5, "bash-local: request.timeoutMs must be a positive number, got -5"},
			{math.Inf(-1), "bash-local: request.timeoutMs must be a positive number, got -Inf"},
		} {
			if _, err := plain.Resolve(shell.ExecRequest{Command: "true", TimeoutMs: f64(c.in)}); err == nil || err.Error() != c.want {
				t.Errorf("timeoutMs %v: %v, want %q", c.in, err, c.want)
			}
		}
	})
	t.Run("workdir", func(t *testing.T) {
		for _, c := range []struct {
			ex      *bashexec.Executor
			workdir string
			want    string
		}{
			{plain, "", wd},
			{plain, "sub", filepath.Join(wd, "sub")},
			{plain, "/abs/./x/..", "/abs"},
			{withCwd, "", cwd},
			{withCwd, "sub/../other", filepath.Join(cwd, "other")},
			{withCwd, "/elsewhere", "/elsewhere"},
			{relCwd, "", filepath.Join(wd, "rel/dir")},
			{relCwd, "x", filepath.Join(wd, "rel/dir/x")},
		} {
			spec, err := c.ex.Resolve(shell.ExecRequest{Command: "true", Workdir: c.workdir})
			if err != nil || spec.Workdir != c.want {
				t.Errorf("workdir %q → %q, %v; want %q", c.workdir, spec.Workdir, err, c.want)
			}
		}
	})
	t.Run("carried only when given", func(t *testing.T) {
		stdin := ""
		env := map[string]string{"A": "1"}
		dsh := map[string]string{"DSH_SESSION_ID": "s1"}
		policy := &shell.SandboxPolicy{Mode: shell.ModeReadOnly, WorkspaceRoot: "/w"}
		spec, err := plain.Resolve(shell.ExecRequest{Command: "cat", Stdin: &stdin, Env: env, DshEnv: dsh, Sandbox: policy})
		if err != nil {
			t.Fatal(err)
		}
		if spec.Stdin == nil || *spec.Stdin != "" || spec.Stdin == &stdin {
			t.Errorf("Stdin %v: want a copy of the empty string", spec.Stdin)
		}
		if spec.Env["A"] != "1" || len(spec.Env) != 1 || spec.DshEnv["DSH_SESSION_ID"] != "s1" || len(spec.DshEnv) != 1 {
			t.Errorf("Env %v DshEnv %v", spec.Env, spec.DshEnv)
		}
		if spec.Sandbox == nil || *spec.Sandbox != *policy || spec.Sandbox == policy {
			t.Errorf("Sandbox %+v: want a copy", spec.Sandbox)
		}
		env["A"], dsh["DSH_SESSION_ID"], policy.Mode = "changed", "changed", "changed"
		if spec.Env["A"] != "1" || spec.DshEnv["DSH_SESSION_ID"] != "s1" || spec.Sandbox.Mode != shell.ModeReadOnly {
			t.Error("the spec shares state with the request")
		}
		spec, _ = plain.Resolve(shell.ExecRequest{Command: "cat", Env: map[string]string{}})
		if spec.Env == nil || spec.DshEnv != nil || spec.Stdin != nil || spec.Sandbox != nil {
			t.Errorf("an empty env map is given (non-nil), the rest absent: %+v", spec)
		}
	})
	t.Run("expiry and output cap", func(t *testing.T) {
		spec, err := plain.Resolve(shell.ExecRequest{Command: "sleep 1", Expiry: shell.ExpiryNone, TimeoutMs: f64(5)})
		if err != nil || spec.Expiry != shell.ExpiryNone || spec.TimeoutMs != 0 {
			t.Errorf("ExpiryNone: %+v %v; want no timeout", spec, err)
		}
		if _, err := plain.Resolve(shell.ExecRequest{Command: "x", Expiry: "later"}); err == nil ||
			err.Error() != `bash-local: request.expiry must be "kill", "none" or "hand-over", got "later"` {
			t.Errorf("bad expiry: %v", err)
		}
		n := int64(10)
		if spec, err := plain.Resolve(shell.ExecRequest{Command: "x", StdoutMaxBytes: &n}); err != nil || spec.StdoutMaxBytes != 10 {
			t.Errorf("StdoutMaxBytes: %d %v", spec.StdoutMaxBytes, err)
		}
		n = 0
		if _, err := plain.Resolve(shell.ExecRequest{Command: "x", StdoutMaxBytes: &n}); err == nil ||
			err.Error() != "bash-local: request.stdoutMaxBytes must be positive, got 0" {
			t.Errorf("zero StdoutMaxBytes: %v", err)
		}
		if _, err := plain.Resolve(shell.ExecRequest{Command: "echo a\x00b"}); err == nil ||
			err.Error() != "bash-local: invalid command: it contains a NUL byte" {
			t.Errorf("NUL command: %v", err)
		}
	})
}

func TestExecuteRejectsUnresolvedSpecs(t *testing.T) {
	ex := newExecutor(t, bashexec.DefaultConfig(), bashexec.Options{})
	for _, c := range []struct {
		spec shell.ExecSpec
		want string
	}{
		{shell.ExecSpec{Command: "true"}, `bash-local: spec is not resolved: expiry ""`},
		{shell.ExecSpec{Command: "true", Expiry: shell.ExpiryKill, StdoutMaxBytes: 1, Workdir: "/"}, "bash-local: spec is not resolved: timeoutMs 0"},
		{shell.ExecSpec{Command: "true", Expiry: shell.ExpiryNone, Workdir: "/"}, "bash-local: spec is not resolved: stdoutMaxBytes 0"},
		{shell.ExecSpec{Command: "true", Expiry: shell.ExpiryNone, StdoutMaxBytes: 1, Workdir: "rel"}, `bash-local: spec is not resolved: workdir "rel" is not absolute`},
	} {
		if x, err := ex.Execute(context.Background(), c.spec); err == nil || err.Error() != c.want {
			if x != nil {
				<-x.Done()
			}
			t.Errorf("Execute(%+v): %v, want %q", c.spec, err, c.want)
		}
	}
}

// The hooks a confining executor uses: Prepare rewrites argv/env before the spawn and
// returns a finisher that adds facts to the result; a Prepare error runs nothing.
func TestPrepareAndFinishHooks(t *testing.T) {
	proctest.NoLeftovers(t)
	var seen shell.ExecSpec
	var bash string
	ex := newExecutor(t, bashexec.DefaultConfig(), bashexec.Options{
		Name:        "bash-sandbox",
		SandboxMode: shell.ModeWorkspaceWrite,
		Prepare: func(ctx context.Context, spec shell.ExecSpec, cmd *bashexec.Command) (bashexec.FinishFunc, error) {
			seen = spec
			bash = cmd.Argv[0]
			if spec.Command == "refuse" {
				return nil, errors.New(`sandbox mode "read-only" is requested but no sandbox backend is usable on this host; refusing to run the command unconfined.`)
			}
			// A launcher-style wrapper: [launcher, args…, "--", bash, "-c", cmd].
			cmd.Argv = append([]string{"/usr/bin/env", "WRAPPED_BY=launcher"}, cmd.Argv...)
			env := map[string]string{"FROM_PREPARE": "1"}
			for k, v := range cmd.Env {
				env[k] = v
			}
			cmd.Env = env
			return func(res *shell.RunResult) {
				res.Sandbox = &shell.SandboxFacts{Mode: spec.Sandbox.Mode, Enforcement: "full",
					Denied: res.ExitCode != nil && *res.ExitCode != 0 && strings.Contains(res.Stderr.Text, "Permission denied")}
			}, nil
		},
	})
	if ex.SandboxMode() != shell.ModeWorkspaceWrite {
		t.Errorf("SandboxMode() = %q", ex.SandboxMode())
	}
	policy := &shell.SandboxPolicy{Mode: shell.ModeReadOnly, WorkspaceRoot: "/"}
	spec, err := ex.Resolve(shell.ExecRequest{Command: `echo "$WRAPPED_BY $FROM_PREPARE $CALLER"; echo 'x: Permission denied' >&2; exit 1`,
		Env: map[string]string{"CALLER": "c"}, Sandbox: policy})
	if err != nil {
		t.Fatal(err)
	}
	x, err := ex.Execute(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	res, err := x.Result(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if seen.Command != spec.Command || seen.Sandbox == nil || seen.Sandbox.Mode != shell.ModeReadOnly || bash != "bash" {
		t.Errorf("Prepare saw spec %+v, bash %q", seen, bash)
	}
	if res.Stdout.Text != "launcher 1 c\n" || res.Sandbox == nil || !res.Sandbox.Denied || res.Sandbox.Mode != shell.ModeReadOnly || res.Sandbox.Enforcement != "full" {
		t.Errorf("result %+v sandbox %+v", res, res.Sandbox)
	}
	if spec.Env["FROM_PREPARE"] != "" {
		t.Error("Prepare's env leaked into the caller's spec")
	}

	dir := t.TempDir()
	spec, _ = ex.Resolve(shell.ExecRequest{Command: "refuse", Workdir: dir})
	if x, err := ex.Execute(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "refusing to run the command unconfined") || x != nil {
		t.Errorf("Execute with a failing Prepare: %v %v", x, err)
	}
}

func TestMissingBashIsAnInfrastructureError(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	ex := newExecutor(t, bashexec.DefaultConfig(), bashexec.Options{})
	for _, expiry := range []shell.Expiry{shell.ExpiryKill, shell.ExpiryNone} {
		spec, err := ex.Resolve(shell.ExecRequest{Command: "echo hi", Expiry: expiry})
		if err != nil {
			t.Fatal(err)
		}
		x, err := ex.Execute(context.Background(), spec)
		if err != nil {
			t.Fatalf("Execute: %v (a spawn failure must be the handle's)", err)
		}
		<-x.Done()
		const note = "spawn failed: exec bash: executable file not found in $PATH"
		if _, err := x.Result(context.Background()); err == nil || err.Error() != "bash-local: "+note {
			t.Errorf("Result error %v", err)
		}
		if r := x.ReadOutput(); r.Delta != "[stderr]\n"+note+"\n" || r.Lossy {
			t.Errorf("first read %+v", r)
		}
		if r := x.ReadOutput(); r.Delta != "" {
			t.Errorf("second read %+v", r)
		}
		if ex, ok := x.Exit(); !ok || ex.State() != proc.Killed || ex.Code != nil || ex.Signal != "" || ex.Err == nil || ex.Err.Error() != "bash-local: "+note {
			t.Errorf("exit %+v, %v", ex, ok)
		}
		if x.Kill() || x.Pid() != 0 {
			t.Errorf("Kill %v Pid %d", x.Kill(), x.Pid())
		}
	}
}

func TestReadOutputHoldsBackAPartialRune(t *testing.T) {
	proctest.NoLeftovers(t)
	ex := newExecutor(t, bashexec.DefaultConfig(), bashexec.Options{})
	dir := t.TempDir()
	gate, written := filepath.Join(dir, "gate"), filepath.Join(dir, "written")
	spec, _ := ex.Resolve(shell.ExecRequest{Command: `printf 'a\xc3'; printf 'b\xe2\x82' >&2; touch ` + written +
		`; while [ ! -e ` + gate + ` ]; do sleep 0.01; done; printf '\xa9z'; printf '\xacc' >&2`,
		Expiry: shell.ExpiryNone})
	x, err := ex.Execute(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	proctest.WaitFor(t, 10*time.Second, "the first bytes", func() bool {
		_, err := os.Stat(written)
		return err == nil
	})
	// The pipes may still hold the bytes for an instant: read until both streams showed up.
	var first strings.Builder
	proctest.WaitFor(t, 10*time.Second, "both streams", func() bool {
		first.WriteString(x.ReadOutput().Delta)
		return strings.Contains(first.String(), "a") && strings.Contains(first.String(), "b")
	})
	if got := first.String(); got != "a\n[stderr]\nb" && got != "a[stderr]\nb" {
		t.Errorf("first reads %q; want the partial runes held back", got)
	}
	os.WriteFile(gate, nil, 0o600)
	<-x.Done()
	if r := x.ReadOutput(); r.Delta != "\xc3\xa9z\n[stderr]\n\xe2\x82\xacc" {
		t.Errorf("second read %q", r.Delta)
	}
}

func TestTruncatedTailStartsAtARuneBoundary(t *testing.T) {
	proctest.NoLeftovers(t)
	ex := newExecutor(t, bashexec.DefaultConfig(), bashexec.Options{})
	n := int64(1001) // odd: the cut falls inside a two-byte rune
	spec, _ := ex.Resolve(shell.ExecRequest{Command: `for i in $(seq 1 2000); do printf 'é'; done`, StdoutMaxBytes: &n})
	x, err := ex.Execute(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	res, err := x.Result(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Stdout.Truncated || !utf8.ValidString(res.Stdout.Text) || res.Stdout.Text != strings.Repeat("é", 500) {
		t.Errorf("tail: truncated %v valid %v len %d", res.Stdout.Truncated, utf8.ValidString(res.Stdout.Text), len(res.Stdout.Text))
	}
	if res.Stdout.SpillPath == "" {
		t.Fatal("no spill file")
	}
	data, _ := os.ReadFile(res.Stdout.SpillPath)
	if string(data) != strings.Repeat("é", 2000) {
		t.Errorf("spill file has %d bytes", len(data))
	}
}

// The session a request names owns its spill files: they go to that session's own
// directory.
func TestSpillFilesBelongToTheSession(t *testing.T) {
	proctest.NoLeftovers(t)
	ex := newExecutor(t, bashexec.DefaultConfig(), bashexec.Options{})
	n := int64(10)
	dirs := map[string]string{}
	for _, session := range []string{"alpha", "beta", ""} {
		spec, _ := ex.Resolve(shell.ExecRequest{Command: "seq 1 100", StdoutMaxBytes: &n, SessionID: session})
		x, err := ex.Execute(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		res, err := x.Result(context.Background())
		if err != nil || res.Stdout.SpillPath == "" {
			t.Fatalf("%q: %+v %v", session, res.Stdout, err)
		}
		dirs[session] = filepath.Dir(res.Stdout.SpillPath)
	}
	if dirs["alpha"] == dirs["beta"] || dirs["alpha"] == dirs[""] || filepath.Dir(dirs["alpha"]) != filepath.Dir(dirs["beta"]) {
		t.Errorf("spill directories %v: want one per session, side by side", dirs)
	}
}

// A terminal request: the default size where it leaves one zero, a copy in the spec,
// the refusals (a size out of range, stdin bytes beside it, a spawner without
// terminals); a hand-over expiry resolves its timeout and arms no deadline.
func TestResolveTerminalAndHandOver(t *testing.T) {
	ex := newExecutor(t, bashexec.DefaultConfig(), bashexec.Options{})
	if !ex.Terminals() {
		t.Fatal("the Supervisor's spawner runs terminals")
	}
	req := &shell.Terminal{Cols: 80}
	spec, err := ex.Resolve(shell.ExecRequest{Command: "true", Terminal: req})
	if err != nil || spec.Terminal == nil || *spec.Terminal != (shell.Terminal{Cols: 80, Rows: 40}) || spec.Terminal == req {
		t.Errorf("terminal %+v, %v", spec.Terminal, err)
	}
	if spec, _ := ex.Resolve(shell.ExecRequest{Command: "true"}); spec.Terminal != nil {
		t.Errorf("a terminal nobody asked for: %+v", spec.Terminal)
	}
	stdin := "x"
	for _, c := range []struct {
		req  shell.ExecRequest
		want string
	}{
		{shell.ExecRequest{Command: "true", Terminal: &shell.Terminal{Cols: -1}}, "bash-local: request.terminal: cols and rows must be between 1 and 65535, got -1x40"},
		{shell.ExecRequest{Command: "true", Terminal: &shell.Terminal{Rows: 65536}}, "bash-local: request.terminal: cols and rows must be between 1 and 65535, got 120x65536"},
		{shell.ExecRequest{Command: "true", Terminal: &shell.Terminal{}, Stdin: &stdin}, "bash-local: request.stdin cannot be given with a terminal: write the input to the terminal"},
	} {
		if _, err := ex.Resolve(c.req); err == nil || err.Error() != c.want {
			t.Errorf("Resolve: %v, want %q", err, c.want)
		}
	}
	plain, _ := bashexec.New(pipesOnly{}, bashexec.DefaultConfig(), bashexec.Options{Name: "bash-plain"})
	if plain.Terminals() {
		t.Error("a spawner without terminals")
	}
	if _, err := plain.Resolve(shell.ExecRequest{Command: "true", Terminal: &shell.Terminal{}}); err == nil ||
		err.Error() != "bash-plain: this executor cannot run commands under a terminal" {
		t.Errorf("terminal without a terminal spawner: %v", err)
	}

	spec, err = ex.Resolve(shell.ExecRequest{Command: "sleep 0.3; echo late", Expiry: shell.ExpiryHandOver, TimeoutMs: f64(50)})
	if err != nil || spec.Expiry != shell.ExpiryHandOver || spec.TimeoutMs != 50 {
		t.Fatalf("hand-over spec %+v, %v", spec, err)
	}
	x, err := ex.Execute(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	res, err := x.Result(context.Background())
	if err != nil || res.TimedOut || res.Stdout.Text != "late\n" || res.TimeoutMs != 50 {
		t.Errorf("a hand-over command past its timeout: %+v, %v", res, err)
	}
}

// pipesOnly is a Spawner that cannot run terminals (it is never asked to spawn).
type pipesOnly struct{}

func (pipesOnly) Spawn(context.Context, bashexec.Command, bashexec.Limits) (bashexec.Process, error) {
	return nil, errors.New("not used")
}

// Detach takes back the deadline and the call's context, once, while the command runs;
// what was read before stays read.
func TestDetach(t *testing.T) {
	proctest.NoLeftovers(t)
	ex := newExecutor(t, bashexec.DefaultConfig(), bashexec.Options{})
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	spec, _ := ex.Resolve(shell.ExecRequest{Command: "echo one; while [ ! -e " + gate + " ]; do sleep 0.01; done; echo two", TimeoutMs: f64(300)})
	ctx, cancel := context.WithCancel(context.Background())
	x, err := ex.Execute(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	var first string
	proctest.WaitFor(t, 10*time.Second, "the first line", func() bool { first += x.ReadOutput().Delta; return first == "one\n" })
	if !x.(shell.Detacher).Detach() {
		t.Fatal("Detach of a running command")
	}
	cancel()
	select { // twice the timeout: neither the deadline nor the cancelled context kills it
	case <-x.Done():
		t.Fatal("the detached command ended")
	case <-time.After(600 * time.Millisecond):
	}
	os.WriteFile(gate, nil, 0o600)
	<-x.Done()
	if r := x.ReadOutput(); r.Delta != "two\n" {
		t.Errorf("after the hand-over: %q", r.Delta)
	}
	if e, _ := x.Exit(); proctest.Code(e) != 0 || e.Reason != proc.ReasonNone {
		t.Errorf("exit %+v", e)
	}
	if x.(shell.Detacher).Detach() {
		t.Error("Detach of a finished command")
	}

	spec, _ = ex.Resolve(shell.ExecRequest{Command: "sleep 60", TimeoutMs: f64(50)})
	x, _ = ex.Execute(context.Background(), spec)
	<-x.Done()
	if x.(shell.Detacher).Detach() {
		t.Error("Detach after the deadline killed it")
	}
}
