package ssh_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/internal/sshtest"
	"github.com/dsh-dev/dsh/plugins/ssh"
	"github.com/dsh-dev/dsh/proc"
)

func TestConfigValidation(t *testing.T) {
	for _, c := range []struct {
		tune func(*ssh.Config)
		want string
	}{
		{func(c *ssh.Config) { c.Address = "" }, "ssh: address is required (host:port)"},
		{func(c *ssh.Config) { c.Address = "build 1" }, `ssh: address must be host:port, got "build 1"`},
		{func(c *ssh.Config) { c.Address = "h:" }, `ssh: address must be host:port with a port from 1 to 65535, got "h:"`},
		{func(c *ssh.Config) { c.Address = ":22" }, `ssh: address must be host:port, got ":22"`},
		{func(c *ssh.Config) { c.Address = "h:0" }, `ssh: address must be host:port with a port from 1 to 65535, got "h:0"`},
		{func(c *ssh.Config) { c.Address = "h:ssh" }, `ssh: address must be host:port with a port from 1 to 65535, got "h:ssh"`},
		{func(c *ssh.Config) { c.KeepaliveMs = 0 }, "ssh: keepaliveMs must be a positive finite number"},
		{func(c *ssh.Config) { c.MaxConnections = 0 }, "ssh: maxConnections must be an integer from 1 to 64"},
		{func(c *ssh.Config) { c.MaxConnections = 1.5 }, "ssh: maxConnections must be an integer from 1 to 64"},
		{func(c *ssh.Config) { c.SpillBudgetBytes = -1 }, "ssh: spillBudgetBytes must be a positive integer, got -1"},
		{func(c *ssh.Config) { c.User = "a\nb" }, `ssh: user must be a login name, got "a\nb"`},
	} {
		cfg := ssh.DefaultConfig()
		cfg.Address = "build-1:22"
		c.tune(cfg)
		// Validate words the key; New (like the container) names the plugin in front.
		if err := cfg.Validate(); err == nil || "ssh: "+err.Error() != c.want {
			t.Errorf("Validate() = %v, want %q", err, c.want)
		}
		if _, err := ssh.New(cfg, ssh.Options{}); err == nil || err.Error() != c.want {
			t.Errorf("New() = %v, want %q", err, c.want)
		}
	}
	// A host alone means port 22, as for ssh(1).
	keys := t.TempDir()
	key, knownHosts := filepath.Join(keys, "id_ed25519"), filepath.Join(keys, "known_hosts")
	sshtest.WriteKey(t, key)
	if err := os.WriteFile(knownHosts, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]string{"127.0.0.1": "127.0.0.1:22", "build-1": "build-1:22", "::1": "[::1]:22", "[::1]": "[::1]:22", "h:2222": "h:2222"} {
		cfg := ssh.DefaultConfig()
		cfg.Address, cfg.IdentityFile, cfg.KnownHostsFile = addr, key, knownHosts
		h, err := ssh.New(cfg, ssh.Options{})
		if err != nil || h.Address() != want {
			t.Errorf("address %q: %v, %v; want %s", addr, h, err, want)
			continue
		}
		h.Close()
	}
	// Through the container: a string where a number belongs names the key the same way.
	cat, err := container.NewCatalog(ssh.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{Logger: quietLogger()})
	defer rt.Close()
	err = rt.Compose("t", []container.Row{{ID: "ssh", Plugin: "ssh", Config: map[string]any{"address": "h:22", "keepaliveMs": "soon"}}})
	if err == nil || !strings.Contains(err.Error(), `ssh: keepaliveMs must be a positive finite number, got the string "soon"`) {
		t.Errorf("compose with a string keepaliveMs: %v", err)
	}
	// The key file and known_hosts are read at activation.
	dir := t.TempDir()
	cfg := ssh.DefaultConfig()
	cfg.Address, cfg.IdentityFile, cfg.KnownHostsFile = "127.0.0.1:22", filepath.Join(dir, "nokey"), filepath.Join(dir, "known_hosts")
	if _, err := ssh.New(cfg, ssh.Options{}); err == nil || err.Error() != "ssh: identityFile: open "+cfg.IdentityFile+": no such file or directory" {
		t.Errorf("missing key: %v", err)
	}
}

// Item 4: an unknown or changed host key fails activation with the exact message, and
// the row shows it.
func TestStrictHostKeys(t *testing.T) {
	srv := sshtest.Start(t)
	dir := t.TempDir()
	unknown := filepath.Join(dir, "unknown_hosts")
	// Lists another host (this server's key, under another port) only.
	if err := os.WriteFile(unknown, []byte(sshtest.KnownHostsLine("127.0.0.1:1", srv.HostKey)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(dir, "changed_hosts")
	srv.TrustHostKey(changed, sshtest.NewHostKey(t))

	for _, kh := range []string{unknown, changed} {
		want := "ssh: host key for " + srv.Addr + " is not trusted by " + kh
		cfg := config(srv, t)
		cfg.KnownHostsFile = kh
		h, err := ssh.New(cfg, ssh.Options{Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		err = h.Connect(context.Background())
		h.Close()
		var hk *ssh.HostKeyError
		if err == nil || err.Error() != want || !errors.As(err, &hk) {
			t.Errorf("Connect with %s: %v\nwant %q", filepath.Base(kh), err, want)
		}

		cat, err := container.NewCatalog(ssh.Plugin)
		if err != nil {
			t.Fatal(err)
		}
		rt := container.NewRuntime(cat, container.Options{Logger: quietLogger()})
		conf := srv.Config(map[string]any{"knownHostsFile": kh})
		if err := rt.Compose("t", []container.Row{{ID: "ssh", Plugin: "ssh", Config: conf}}); err != nil {
			t.Fatal(err)
		}
		row := rt.Status().Rows[0]
		if row.State != container.StateFailed || row.Error != want {
			t.Errorf("status with %s: %s %q\nwant failed %q", filepath.Base(kh), row.State, row.Error, want)
		}
		if _, ok := container.Lookup(rt, ssh.Service); ok {
			t.Error("an untrusted host was provided as the ssh service")
		}
		rt.Close()
	}

	// A missing known_hosts file is a config error naming the key.
	cfg := config(srv, t)
	cfg.KnownHostsFile = filepath.Join(dir, "absent")
	if _, err := ssh.New(cfg, ssh.Options{}); err == nil || err.Error() != "ssh: knownHostsFile: open "+cfg.KnownHostsFile+": no such file or directory" {
		t.Errorf("missing known_hosts: %v", err)
	}

	// The trusted key works, and the row reports the connection.
	cat, _ := container.NewCatalog(ssh.Plugin)
	rt := container.NewRuntime(cat, container.Options{Logger: quietLogger()})
	defer rt.Close()
	if err := rt.Compose("t", []container.Row{{ID: "ssh", Plugin: "ssh", Config: srv.Config(nil)}}); err != nil {
		t.Fatal(err)
	}
	row := rt.Status().Rows[0]
	if row.State != container.StateActive || !strings.HasPrefix(row.Detail, "connected to "+srv.User+"@"+srv.Addr+" (1 connection") {
		t.Errorf("status with the trusted key: %s %q %q", row.State, row.Error, row.Detail)
	}
}

func TestLoginRefused(t *testing.T) {
	srv := sshtest.Start(t)
	other := sshtest.Start(t) // its client key is not authorized by srv
	cfg := config(srv, t)
	cfg.IdentityFile = other.IdentityFile
	h, err := ssh.New(cfg, ssh.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	err = h.Connect(context.Background())
	var le *ssh.LoginError
	if !errors.As(err, &le) || !strings.HasPrefix(err.Error(), "ssh: cannot log in to "+srv.Addr+" as "+srv.User+": ") {
		t.Errorf("Connect with an unauthorized key: %v", err)
	}
}

func TestRun(t *testing.T) {
	srv := sshtest.StartWith(t, sshtest.Options{SetEnv: map[string]string{"DSH_STALE": "remote", "DSH_SESSION_ID": "remote-stale", "c": "remote-c", "d": "remote-d", "v": "remote-v"}})
	h, _ := newHost(t, srv, nil)
	t.Setenv("DSH_LOCAL_ONLY", "local")
	t.Setenv("LOCAL_ONLY_VAR", "local")

	ex, out, errs := run(t, h, spec("echo out; echo err >&2; exit 3"))
	if proctest.Code(ex) != 3 || ex.Signal != "" || ex.State() == proc.Killed || ex.Err != nil || out != "out\n" || errs != "err\n" {
		t.Errorf("exit 3: %+v %q %q", ex, out, errs)
	}
	ex, _, _ = run(t, h, spec("kill -TERM $$"))
	if ex.Code != nil || ex.Signal != "SIGTERM" || ex.Reason == proc.ReasonTimeout || ex.Reason == proc.ReasonAbort || ex.State() != proc.Killed {
		t.Errorf("kill -TERM $$: %+v", ex)
	}
	ex, _, _ = run(t, h, spec("kill -KILL $$"))
	if ex.Signal != "SIGKILL" {
		t.Errorf("kill -KILL $$: %+v", ex)
	}

	// The command leads its own session: pid = pgid = sid.
	p := start(t, h, spec("echo $$; cat /proc/$$/stat"))
	proctest.AwaitExit(t, p, 10*time.Second)
	lines := strings.SplitN(p.Stdout().Output().Text, "\n", 2)
	if lines[0] != strconv.Itoa(p.Pid()) {
		t.Errorf("$$ = %s, Pid() = %d", lines[0], p.Pid())
	}
	f := strings.Fields(lines[1][strings.LastIndexByte(lines[1], ')')+2:])
	if f[2] != lines[0] || f[3] != lines[0] {
		t.Errorf("pgid %s sid %s, want both %s", f[2], f[3], lines[0])
	}

	// Environment: quoting survives anything; the managed snapshot replaces remote DSH_*;
	// nothing local is sent.
	nasty := []string{`'`, `"`, `$(touch /tmp/dsh-pwned)`, "`id`", `\`, "a\nb", "!", "*", "~", "${HOME}", "é ü", " lead", "trail ", ""}
	env := map[string]string{"TERM": "xterm"}
	dsh := map[string]string{"DSH_SESSION_ID": "managed"}
	var want strings.Builder
	for i, v := range nasty {
		k := "DSH_V" + strconv.Itoa(i)
		dsh[k] = v
		env["V"+strconv.Itoa(i)] = v
	}
	cmd := `printf '%s|' "$TERM" "$NO_COLOR" "$PAGER" "$GIT_PAGER" "$GIT_TERMINAL_PROMPT" "$DSH_SESSION_ID" "${DSH_STALE-unset}" "${DSH_LOCAL_ONLY-unset}" "${LOCAL_ONLY_VAR-unset}"`
	want.WriteString("xterm|1|cat|cat|0|managed|unset|unset|unset|")
	for i, v := range nasty {
		cmd += ` "$V` + strconv.Itoa(i) + `" "$DSH_V` + strconv.Itoa(i) + `"`
		want.WriteString(v + "|" + v + "|")
	}
	s := spec(cmd)
	s.Env, s.DshEnv = env, dsh
	ex, out, errs = run(t, h, s)
	if proctest.Code(ex) != 0 || out != want.String() || errs != "" {
		t.Errorf("environment:\n got %q %q %+v\nwant %q", out, errs, ex, want.String())
	}
	if _, err := os.Stat("/tmp/dsh-pwned"); err == nil {
		os.Remove("/tmp/dsh-pwned")
		t.Error("a variable's value was executed")
	}
	// The remote login environment is the command's base, untouched by the wrapper.
	if _, out, _ := run(t, h, spec(`echo "$c $d $v"`)); out != "remote-c remote-d remote-v\n" {
		t.Errorf("remote variables: %q", out)
	}
	for _, bad := range []map[string]string{{"A-B": "x"}, {"1A": "x"}, {"": "x"}} {
		s := spec("true")
		s.Env = bad
		if _, err := h.Start(context.Background(), s); err == nil || !strings.HasPrefix(err.Error(), "invalid env: ") {
			t.Errorf("env %v: %v", bad, err)
		}
	}
	s = spec("true")
	s.DshEnv = map[string]string{"OTHER": "x"}
	if _, err := h.Start(context.Background(), s); err == nil || err.Error() != `invalid dshEnv: key "OTHER" is not a DSH_* name` {
		t.Errorf("dshEnv OTHER: %v", err)
	}

	// Stdin; none is an empty input.
	s = spec("cat; echo end")
	s.Stdin = []byte("line one\nline two\n")
	if _, out, _ := run(t, h, s); out != "line one\nline two\nend\n" {
		t.Errorf("stdin: %q", out)
	}
	if _, out, _ := run(t, h, spec("cat; echo end")); out != "end\n" {
		t.Errorf("no stdin: %q", out)
	}

	// Working directory: physical path; failures are spawn errors naming the errno.
	dir := t.TempDir()
	os.Symlink(dir, dir+"-link")
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	s = spec("pwd")
	s.Dir = dir + "-link"
	if _, out, _ := run(t, h, s); out != dir+"\n" {
		t.Errorf("pwd in %s: %q", s.Dir, out)
	}
	for _, c := range []struct{ dir, want string }{
		{dir + "/missing", "spawn failed: chdir " + dir + "/missing: ENOENT (no such file or directory)"},
		{file, "spawn failed: chdir " + file + ": ENOTDIR (not a directory)"},
	} {
		s := spec("echo ran")
		s.Dir = c.dir
		_, err := h.Start(context.Background(), s)
		var se *proc.SpawnError
		if err == nil || err.Error() != c.want || !errors.As(err, &se) {
			t.Errorf("dir %s: %v, want %q", c.dir, err, c.want)
		}
	}

	if home, err := h.Home(context.Background()); err != nil || home != os.Getenv("HOME") {
		t.Errorf("Home() = %q, %v; want %q", home, err, os.Getenv("HOME"))
	}
	for _, bad := range []ssh.Spec{{Command: "true", Dir: "rel", GraceMs: 1, Stdout: capture, Stderr: capture}, {Command: "", Dir: "/", GraceMs: 1, Stdout: capture, Stderr: capture}, {Command: "true", Dir: "/", GraceMs: 0, Stdout: capture, Stderr: capture}} {
		if _, err := h.Start(context.Background(), bad); err == nil || !strings.HasPrefix(err.Error(), "invalid ") {
			t.Errorf("Start(%+v): %v", bad, err)
		}
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.Start(cancelled, spec("true")); err == nil || !strings.HasPrefix(err.Error(), "aborted before spawn: ") {
		t.Errorf("Start with a cancelled context: %v", err)
	}
}

// A remote host without bash: the call fails as a spawn failure.
func TestNoBash(t *testing.T) {
	srv := sshtest.StartWith(t, sshtest.Options{SetEnv: map[string]string{"PATH": "/nonexistent"}})
	h, _ := newHost(t, srv, nil)
	_, err := h.Start(context.Background(), spec("true"))
	if err == nil || err.Error() != "spawn failed: exec bash: ENOENT (no such file or directory)" {
		t.Errorf("Start without bash: %v", err)
	}
}

// Item 2: a timeout ends the whole remote group within timeout + grace + 1 s; a command
// that ignores SIGTERM is SIGKILLed after graceMs.
func TestTimeoutAndGrace(t *testing.T) {
	srv := sshtest.Start(t)
	h, _ := newHost(t, srv, nil)
	s := spec("sleep 300 & echo $!; sleep 60")
	s.GraceMs = 1000
	began := time.Now()
	s.Deadline = began.Add(500 * time.Millisecond)
	p := start(t, h, s)
	readUntil(t, p.Stdout(), "\n")
	child, _ := strconv.Atoi(strings.TrimSpace(p.Stdout().Output().Text))
	if proctest.Gone(child) || proctest.Gone(p.Pid()) {
		t.Fatalf("pids %d and %d should run", p.Pid(), child)
	}
	ex := proctest.AwaitExit(t, p, 10*time.Second)
	took := time.Since(began)
	if ex.Reason != proc.ReasonTimeout || ex.Reason == proc.ReasonAbort || ex.Signal != "SIGTERM" || ex.Code != nil || ex.State() != proc.Killed {
		t.Errorf("timed out: %+v", ex)
	}
	if limit := 500*time.Millisecond + time.Second + time.Second; took > limit {
		t.Errorf("returned after %s, contract %s", took, limit)
	}
	if !proctest.Gone(child) || !proctest.Gone(p.Pid()) || !gone(p.Pid()) {
		t.Errorf("remote processes left: leader %v child %v group %v", !proctest.Gone(p.Pid()), !proctest.Gone(child), sshtest.GroupMembers(p.Pid()))
	}
	t.Logf("sleep 300 & sleep 60, timeout 500ms, grace 1000ms: returned after %s", took)

	s = spec("trap 'echo term' TERM; echo ready; while :; do sleep 0.05; done")
	s.GraceMs = 700
	p = start(t, h, s)
	readUntil(t, p.Stdout(), "ready\n")
	killed := time.Now()
	if first, again := p.Kill(), p.Kill(); !first || !again {
		t.Fatal("Kill of a running command returned false")
	}
	ex = proctest.AwaitExit(t, p, 10*time.Second)
	took = time.Since(killed)
	if ex.Signal != "SIGKILL" || ex.Reason == proc.ReasonTimeout || ex.Reason == proc.ReasonAbort || ex.State() != proc.Killed {
		t.Errorf("TERM-trapping command after Kill: %+v", ex)
	}
	if took < 700*time.Millisecond*9/10 || took > 700*time.Millisecond+3*time.Second {
		t.Errorf("SIGKILL came %s after Kill (grace 700ms)", took)
	}
	if !strings.Contains(p.Stdout().Output().Text, "term\n") {
		t.Errorf("the trap did not see SIGTERM: %q", p.Stdout().Output().Text)
	}
	if !gone(p.Pid()) {
		t.Errorf("group %d left: %v", p.Pid(), sshtest.GroupMembers(p.Pid()))
	}
	if p.Kill() {
		t.Error("Kill after settling returned true")
	}

	// Abort through the context.
	ctx, abort := context.WithCancel(context.Background())
	p, err := h.Start(ctx, spec("echo ready; sleep 60"))
	if err != nil {
		t.Fatal(err)
	}
	readUntil(t, p.Stdout(), "ready\n")
	abort()
	ex = proctest.AwaitExit(t, p, 10*time.Second)
	if ex.Reason != proc.ReasonAbort || ex.Reason == proc.ReasonTimeout || ex.Signal != "SIGTERM" {
		t.Errorf("aborted: %+v", ex)
	}

	// A deadline that passes after the command exited by itself changes nothing; a
	// `cmd &` left behind holding stdout does not hold the call beyond the grace period.
	s = spec("sleep 30 & echo done")
	s.Deadline = time.Now().Add(20 * time.Second)
	began = time.Now()
	p = start(t, h, s)
	ex = proctest.AwaitExit(t, p, 10*time.Second)
	if proctest.Code(ex) != 0 || ex.State() == proc.Killed || p.Stdout().Output().Text != "done\n" || time.Since(began) > 3*time.Second {
		t.Errorf("exit with a straggler: %+v %q after %s", ex, p.Stdout().Output().Text, time.Since(began))
	}
	// What it left behind is still there, as locally (TestClose: until the Host closes).
	if gone(p.Pid()) {
		t.Errorf("the straggler of group %d is gone", p.Pid())
	}
}

// A login that hangs in its start-up files does not hold a call beyond its deadline
// plus the grace period: the command is abandoned before it ran and times out.
func TestSlowLogin(t *testing.T) {
	dir := t.TempDir()
	flag := filepath.Join(dir, "slow")
	rc := filepath.Join(dir, "bash_env")
	// Only the login shell (whose command line is dsh's exec line) waits.
	script := `case $BASH_EXECUTION_STRING in "exec bash --norc -c "*) [ -e ` + flag + ` ] && sleep 2;; esac` + "\n"
	if err := os.WriteFile(rc, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := sshtest.StartWith(t, sshtest.Options{SetEnv: map[string]string{"BASH_ENV": rc}})
	h, _ := newHost(t, srv, nil)
	if ex, out, _ := run(t, h, spec("echo fast")); proctest.Code(ex) != 0 || out != "fast\n" {
		t.Fatalf("without the flag: %+v %q", ex, out)
	}
	os.WriteFile(flag, nil, 0o600)
	s := spec("echo never")
	s.GraceMs = 300
	began := time.Now()
	s.Deadline = began.Add(300 * time.Millisecond)
	p := start(t, h, s)
	ex := proctest.AwaitExit(t, p, 10*time.Second)
	took := time.Since(began)
	if ex.Reason != proc.ReasonTimeout || ex.Code != nil || ex.Signal != "" || ex.State() != proc.Killed || ex.Err != nil || p.Pid() != 0 {
		t.Errorf("a command that never started: %+v pid %d", ex, p.Pid())
	}
	if took > 300*time.Millisecond+300*time.Millisecond+time.Second {
		t.Errorf("returned after %s", took)
	}
	if out := p.Stdout().Output().Text; out != "" {
		t.Errorf("output %q", out)
	}
	os.Remove(flag)
}

// Output is bounded, the tail kept, the whole stream in a local spill file.
func TestOutputBounds(t *testing.T) {
	srv := sshtest.Start(t)
	h, _ := newHost(t, srv, nil)
	s := spec("head -c 300000 /dev/zero | tr '\\0' a; printf end")
	s.Stdout = proc.Capture{MaxBytes: 1000, SpillMaxBytes: 1 << 20}
	_, _, _ = run(t, h, spec("true"))
	p := start(t, h, s)
	proctest.AwaitExit(t, p, 20*time.Second)
	o := p.Stdout().Output()
	if !o.Truncated || o.Text != strings.Repeat("a", 997)+"end" || o.Bytes != 300003 || o.SpillPath == "" {
		t.Fatalf("output: truncated %v, %d bytes kept, %d total, spill %q", o.Truncated, len(o.Text), o.Bytes, o.SpillPath)
	}
	data, err := os.ReadFile(o.SpillPath)
	if err != nil || len(data) != 300003 {
		t.Errorf("spill file: %d bytes, %v", len(data), err)
	}
	if fi, err := os.Stat(o.SpillPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("spill file mode: %v %v", fi, err)
	}
}

// Item 5 at the service level: sshd stopped mid-command ends the running commands with
// the LostError (and a note in their stderr); the remote commands are killed once a
// connection is up again; new commands reconnect.
func TestLostConnection(t *testing.T) {
	srv := sshtest.Start(t)
	h, st := newHost(t, srv, nil)
	p := start(t, h, spec("echo started; echo err-before >&2; sleep 30"))
	readUntil(t, p.Stdout(), "started\n")
	readUntil(t, p.Stderr(), "err-before\n")
	pid := p.Pid()

	srv.Stop()
	ex := proctest.AwaitExit(t, p, 10*time.Second)
	want := "ssh: connection to " + srv.Addr + " lost: the server closed the connection"
	var le *ssh.LostError
	if ex.Err == nil || ex.Err.Error() != want || !errors.As(ex.Err, &le) || ex.State() != proc.Killed || ex.Code != nil || ex.Signal != "" {
		t.Errorf("exit after the loss: %+v\nwant Err %q", ex, want)
	}
	if got := p.Stderr().Output().Text; got != "err-before\n"+want+"\n" {
		t.Errorf("stderr after the loss: %q", got)
	}
	// The connection's control shell saw it go and killed what it ran, without waiting
	// for dsh to come back.
	proctest.WaitFor(t, 5*time.Second, "the remote command to be killed by its control shell", func() bool { return gone(pid) })
	proctest.WaitFor(t, 5*time.Second, "a disconnected state", func() bool {
		return strings.HasPrefix(h.State(), "disconnected from "+srv.User+"@"+srv.Addr+": "+want)
	})
	if !strings.Contains(h.State(), "1 remote command to kill when reconnected") {
		t.Errorf("state: %q", h.State())
	}
	// A new command while sshd is down fails at once as a spawn failure.
	_, err := h.Start(context.Background(), spec("true"))
	var se *proc.SpawnError
	if err == nil || !errors.As(err, &se) || err.Error() != "spawn failed: connect "+srv.Addr+": ECONNREFUSED (connection refused)" {
		t.Errorf("Start while down: %v", err)
	}

	srv.Restart()
	ex, out, _ := run(t, h, spec("echo back"))
	if proctest.Code(ex) != 0 || out != "back\n" {
		t.Errorf("after restart: %+v %q", ex, out)
	}
	proctest.WaitFor(t, 5*time.Second, "a connected state without orphans", func() bool {
		return strings.HasPrefix(h.State(), "connected to ") && !strings.Contains(h.State(), "to kill")
	})
	if !st.HasPrefix("disconnected from ") {
		t.Errorf("states: %v", st.All())
	}
}

// A host that stops answering is found out by keepalives; the commands of the lost
// connection are killed through a new connection (the old one's processes are still
// frozen, so its control shell cannot do it).
func TestKeepalive(t *testing.T) {
	srv := sshtest.Start(t)
	h, st := newHost(t, srv, func(c *ssh.Config) { c.KeepaliveMs = 100 })
	p := start(t, h, spec("echo started; sleep 30"))
	readUntil(t, p.Stdout(), "started\n")
	srv.Freeze()
	defer srv.Thaw()
	ex := proctest.AwaitExit(t, p, 10*time.Second)
	want := "ssh: connection to " + srv.Addr + " lost: no reply to keepalive requests for 300ms"
	if ex.Err == nil || ex.Err.Error() != want {
		t.Errorf("exit after the host froze: %+v, want %q", ex, want)
	}
	proctest.WaitFor(t, 10*time.Second, "the orphan to be killed through a new connection", func() bool { return gone(p.Pid()) })
	if !st.HasPrefix("disconnected from " + srv.User + "@" + srv.Addr + ": " + want + "; reconnecting with backoff; 1 remote command to kill when reconnected") {
		t.Errorf("states: %q", st.All())
	}
	srv.Thaw()
}

// Item 6 (correctness part): 50 concurrent commands over at most maxConnections
// connections, also when the server allows fewer channels per connection than
// OpenSSH's default.
func TestConcurrency(t *testing.T) {
	for _, maxSessions := range []int{0, 3} {
		t.Run("MaxSessions="+strconv.Itoa(maxSessions), func(t *testing.T) {
			srv := sshtest.StartWith(t, sshtest.Options{MaxSessions: maxSessions})
			h, st := newHost(t, srv, nil)
			var wg sync.WaitGroup
			for i := 0; i < 50; i++ {
				wg.Go(func() {
					p, err := h.Start(context.Background(), spec("echo "+strconv.Itoa(i)))
					if err != nil {
						t.Errorf("%d: %v", i, err)
						return
					}
					<-p.Done()
					ex, _ := p.Exit()
					if proctest.Code(ex) != 0 || p.Stdout().Output().Text != strconv.Itoa(i)+"\n" {
						t.Errorf("%d: %+v %q", i, ex, p.Stdout().Output().Text)
					}
				})
			}
			wg.Wait()
			most := 0
			for _, d := range st.All() {
				if n, ok := connections(d); ok {
					most = max(most, n)
				}
			}
			if most < 2 || most > 4 {
				t.Errorf("at most %d connections (want 2..4: spread, within maxConnections)", most)
			}
		})
	}
}

// connections parses "connected to … (N connections, …)".
func connections(state string) (int, bool) {
	_, rest, ok := strings.Cut(state, " (")
	if !ok || !strings.HasPrefix(state, "connected to ") {
		return 0, false
	}
	n, err := strconv.Atoi(strings.Fields(rest)[0])
	return n, err == nil
}

// Closing the Host kills what runs and settles it killed; finished results stay.
func TestClose(t *testing.T) {
	srv := sshtest.Start(t)
	cfg := config(srv, t)
	h, err := ssh.New(cfg, ssh.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	finished := start(t, h, spec("echo done; exit 4"))
	proctest.AwaitExit(t, finished, 10*time.Second)
	leaver := start(t, h, spec("sleep 60 & echo left"))
	if ex := proctest.AwaitExit(t, leaver, 10*time.Second); proctest.Code(ex) != 0 || gone(leaver.Pid()) {
		t.Fatalf("a command leaving a process behind: %+v, group gone %v", ex, gone(leaver.Pid()))
	}
	plain := start(t, h, spec("echo ready; sleep 60"))
	trapper := start(t, h, spec("trap '' TERM; echo ready; sleep 60"))
	readUntil(t, plain.Stdout(), "ready\n")
	readUntil(t, trapper.Stdout(), "ready\n")
	h.Close()
	for _, c := range []struct {
		p      *ssh.Process
		signal string
	}{{plain, "SIGTERM"}, {trapper, "SIGKILL"}} {
		select {
		case <-c.p.Done():
		default:
			t.Fatal("Close returned before the command settled")
		}
		ex, _ := c.p.Exit()
		if ex.Signal != c.signal || ex.State() != proc.Killed || ex.Reason == proc.ReasonTimeout || ex.Reason == proc.ReasonAbort || ex.Err != nil {
			t.Errorf("after Close: %+v, want %s", ex, c.signal)
		}
		if !gone(c.p.Pid()) {
			t.Errorf("group %d left after Close", c.p.Pid())
		}
	}
	if !gone(leaver.Pid()) {
		t.Errorf("what a finished command left running survived Close: %v", sshtest.GroupMembers(leaver.Pid()))
	}
	if ex, _ := finished.Exit(); proctest.Code(ex) != 4 || finished.Stdout().Output().Text != "done\n" {
		t.Errorf("finished command changed: %+v", ex)
	}
	if _, err := h.Start(context.Background(), spec("true")); !errors.Is(err, ssh.ErrClosed) {
		t.Errorf("Start after Close: %v", err)
	}
	if h.State() != "closed" {
		t.Errorf("state %q", h.State())
	}
}

// The defaults: the local user, ~/.ssh/id_ed25519 else ~/.ssh/id_rsa, and
// ~/.ssh/known_hosts.
func TestDefaults(t *testing.T) {
	srv := sshtest.Start(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	cfg := ssh.DefaultConfig()
	cfg.Address = srv.Addr
	cfg.SpillRoot = t.TempDir()
	want := "ssh: identityFile: neither " + home + "/.ssh/id_ed25519 nor " + home + "/.ssh/id_rsa exists; set identityFile"
	if _, err := ssh.New(cfg, ssh.Options{}); err == nil || err.Error() != want {
		t.Errorf("no key: %v\nwant %q", err, want)
	}
	os.Mkdir(filepath.Join(home, ".ssh"), 0o700)
	copyFile(t, srv.IdentityFile, filepath.Join(home, ".ssh", "id_rsa"))
	if _, err := ssh.New(cfg, ssh.Options{}); err == nil || err.Error() != "ssh: knownHostsFile: open "+home+"/.ssh/known_hosts: no such file or directory" {
		t.Errorf("no known_hosts: %v", err)
	}
	copyFile(t, srv.KnownHostsFile, filepath.Join(home, ".ssh", "known_hosts"))
	h, err := ssh.New(cfg, ssh.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Connect(context.Background()); err != nil {
		t.Fatalf("connect with the defaults: %v", err)
	}
	if h.User() != srv.User {
		t.Errorf("default user %q, want the local user %q", h.User(), srv.User)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(to, data, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
}
