package bashssh_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	dshprofile "github.com/dsh-dev/dsh/container/profile"
	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/internal/sshtest"
	bashlocal "github.com/dsh-dev/dsh/plugins/bashlocal"
	bashssh "github.com/dsh-dev/dsh/plugins/bashssh"
	"github.com/dsh-dev/dsh/plugins/jobs"
	"github.com/dsh-dev/dsh/plugins/prompt"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
	"github.com/dsh-dev/dsh/plugins/ssh"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/shell"
	"github.com/dsh-dev/dsh/shell/bashexec"
)

// profile is a harness with bash-ssh as its executor: what examples/ssh/profile.yaml
// composes, with every path pointing into the test's directories.
const profile = `plugins:
  - id: tools
    name: tools
  - id: prompt
    name: prompt
  - id: shell-env
    name: shell-env
    config: {dshHome: %q}
  - id: jobs
    name: jobs
  - id: ssh
    name: ssh
    config: {address: %q, user: %q, identityFile: %q, knownHostsFile: %q, spillRoot: %q}
  - id: bash
    name: bash-ssh
    config: {cwd: %q, graceMs: 500, timeoutMs: %d}
  - id: tool-bash
    name: tool-bash
`

// stack is a running composition over a real sshd.
type stack struct {
	t        *testing.T
	srv      *sshtest.Server
	rt       *container.Runtime
	loader   *dshprofile.Loader
	path     string
	cwd      string // the bash row's cwd on the remote host
	home     string
	spill    string
	session  *container.Session
	timeout  int
	reloader *dshprofile.Reloader

	mu      sync.Mutex
	reloads []error
}

func catalog(t testing.TB) *container.Catalog {
	t.Helper()
	cat, err := container.NewCatalog(tools.Plugin, prompt.Plugin, shellenv.Plugin, jobs.Plugin, toolbash.Plugin,
		ssh.Plugin, bashssh.Plugin, subprocess.Plugin, bashlocal.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// newStack writes the profile file, composes it and watches it for edits.
func newStack(t *testing.T, srv *sshtest.Server) *stack {
	t.Helper()
	dir := t.TempDir()
	s := &stack{t: t, srv: srv, path: filepath.Join(dir, "profile.yaml"), cwd: t.TempDir(), home: t.TempDir(), spill: t.TempDir(), timeout: 120000}
	// The session's workspace is a local path that does not exist on the remote host:
	// under a remote executor it must not be used.
	s.session = &container.Session{ID: "ssh-session", Cwd: filepath.Join(dir, "local-only-workspace")}
	s.write()
	s.rt = container.NewRuntime(catalog(t), container.Options{Logger: quietLogger()})
	t.Cleanup(s.rt.Close)
	s.loader = dshprofile.NewLoader(nil)
	p, err := s.loader.Load(s.path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.rt.Compose(p.Name, p.Rows); err != nil {
		t.Fatal(err)
	}
	s.reloader, err = dshprofile.NewReloader(s.rt, s.loader, p, dshprofile.ReloadOptions{
		Debounce: 20 * time.Millisecond,
		Logger:   quietLogger(),
		OnReload: func(err error) { s.mu.Lock(); s.reloads = append(s.reloads, err); s.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.reloader.Close() })
	proctest.WaitFor(t, 10*time.Second, "the reloader's first check", func() bool { return s.reloadCount() >= 1 })
	s.requireActive()
	return s
}

func (s *stack) reloadCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reloads)
}

// write saves the profile like an editor: a new file renamed over the old one.
func (s *stack) write() {
	s.t.Helper()
	text := fmt.Sprintf(profile, s.home, s.srv.Addr, s.srv.User, s.srv.IdentityFile, s.srv.KnownHostsFile, s.spill, s.cwd, s.timeout)
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		s.t.Fatal(err)
	}
}

// reload edits the bash row's timeoutMs, and waits until the reload was applied.
func (s *stack) reload(timeoutMs int) {
	s.t.Helper()
	n := s.reloadCount()
	s.timeout = timeoutMs
	s.write()
	proctest.WaitFor(s.t, 10*time.Second, "the reload", func() bool { return s.reloadCount() > n })
	s.mu.Lock()
	err := s.reloads[len(s.reloads)-1]
	s.mu.Unlock()
	if err != nil {
		s.t.Fatalf("reload: %v", err)
	}
	s.requireActive()
}

func (s *stack) requireActive() {
	s.t.Helper()
	for _, r := range s.rt.Status().Rows {
		if r.State != container.StateActive {
			s.t.Fatalf("row %s is %s: %s (missing %v)", r.ID, r.State, r.Error, r.Missing)
		}
	}
}

func (s *stack) row(id string) container.RowStatus {
	s.t.Helper()
	for _, r := range s.rt.Status().Rows {
		if r.ID == id {
			return r
		}
	}
	s.t.Fatalf("no row %s", id)
	return container.RowStatus{}
}

func (s *stack) call(tool string, args map[string]any) tools.Result {
	s.t.Helper()
	v, ok := container.Lookup(s.rt, tools.Service)
	if !ok {
		s.t.Fatalf("no tools service: %+v", s.rt.Status())
	}
	raw, _ := json.Marshal(args)
	return v.Call(context.Background(), tool, raw, s.session)
}

func (s *stack) bash(command string, extra map[string]any) tools.Result {
	s.t.Helper()
	args := map[string]any{"command": command, "description": "Run a test command"}
	for k, v := range extra {
		args[k] = v
	}
	return s.call("bash", args)
}

func expect(t *testing.T, res tools.Result, text string, isError bool) {
	t.Helper()
	if res.Text != text || res.IsError != isError {
		t.Errorf("got  %q (isError %v)\nwant %q (isError %v)", res.Text, res.IsError, text, isError)
	}
}

func startJob(t *testing.T, s *stack, command string) string {
	t.Helper()
	res := s.bash(command, map[string]any{"run_in_background": true})
	id, ok := strings.CutPrefix(res.Text, "started background job ")
	if !ok || res.IsError {
		t.Fatalf("background start: %q", res.Text)
	}
	return id
}

// readPid waits for a file holding a pid (written by a command on the remote host,
// which is this machine).
var readPid = proctest.WaitPidFile

// Item 1: the rendering table, byte for byte, through the bash tool over bash-ssh;
// the working directory is the executor's, on the remote host.
func TestRenderingsThroughTheTool(t *testing.T) {
	srv := sshtest.Start(t)
	s := newStack(t, srv)
	for _, c := range []struct {
		command string
		extra   map[string]any
		text    string
	}{
		{"echo hello", nil, "hello\n"},
		{"true", nil, "(no output)"},
		{"echo out; echo err >&2", nil, "out\n[stderr]\nerr\n"},
		{"echo failing; exit 3", nil, "failing\n[exit code: 3]"},
		{"sleep 60", map[string]any{"timeoutMs": 100}, "(no output)\n[timed out after 100ms]\n[killed by signal: SIGTERM]"},
		{"kill -TERM $$", nil, "(no output)\n[killed by signal: SIGTERM]"},
	} {
		expect(t, s.bash(c.command, c.extra), c.text, false)
	}
	res := s.bash("echo failing; exit 3", nil)
	raw, _ := json.Marshal(res.Value)
	if want := `{"kind":"foreground","exitCode":3,"signal":null,"timedOut":false,"aborted":false,"timeoutMs":120000,"stdout":{"text":"failing\n","truncated":false},"stderr":{"text":"","truncated":false}}`; string(raw) != want {
		t.Errorf("typed value\n got %s\nwant %s", raw, want)
	}

	// The session's (local) workspace does not apply: the default is the executor's cwd,
	// a relative workdir resolves against it, an absolute one is a remote path.
	if err := os.Mkdir(filepath.Join(s.cwd, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	expect(t, s.bash("pwd", nil), s.cwd+"\n", false)
	expect(t, s.bash("pwd", map[string]any{"workdir": "sub"}), s.cwd+"/sub\n", false)
	expect(t, s.bash("pwd", map[string]any{"workdir": "/"}), "/\n", false)
	res = s.bash("pwd", map[string]any{"workdir": "missing"})
	if !res.IsError || res.Text != "Error: bash-ssh: spawn failed: chdir "+s.cwd+"/missing: ENOENT (no such file or directory)" {
		t.Errorf("missing workdir: %q", res.Text)
	}
	// The managed DSH_* snapshot reaches the remote command.
	expect(t, s.bash(`echo "$DSH_SESSION_ID $DSH_SHELL $DSH_HOME"`, nil), "ssh-session 1 "+s.home+"\n", false)
	if v, _ := container.Lookup(s.rt, shell.Service); v.(*bashssh.Executor).SandboxMode() != "" {
		t.Error("bash-ssh reports a sandbox mode")
	}

	// Without cwd, the default is the remote user's home.
	h := newHost(t, srv, nil)
	ex, err := bashssh.New(h, &bashssh.Config{Config: bashexec.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if ex.RemoteHost() != srv.User+"@"+srv.Addr {
		t.Errorf("RemoteHost() = %q", ex.RemoteHost())
	}
	spec, err := ex.Resolve(shell.ExecRequest{Command: "pwd", Workdir: "sub"})
	if home := os.Getenv("HOME"); err != nil || spec.Workdir != filepath.Join(home, "sub") {
		t.Errorf("workdir without cwd: %q, %v; want under the remote home %s", spec.Workdir, err, home)
	}
}

// Item 3: a background job over ssh is started, read incrementally and killed; it
// survives a hot reload that restarts the bash-ssh row, keeps running and finishes with
// all its output.
func TestJobSurvivesReload(t *testing.T) {
	srv := sshtest.Start(t)
	s := newStack(t, srv)
	dir := t.TempDir()
	gate, pidFile := filepath.Join(dir, "gate"), filepath.Join(dir, "pid")
	job := fmt.Sprintf(`echo $$ > %s; echo before; while [ ! -e %s ]; do sleep 0.02; done; echo after; echo done-err >&2`, pidFile, gate)
	id := startJob(t, s, job)
	pid := readPid(t, pidFile)
	proctest.WaitFor(t, 20*time.Second, "the job's first output", func() bool {
		out := s.call("job_output", map[string]any{"job_id": id})
		if strings.HasPrefix(out.Text, "(no new output)") {
			return false
		}
		expect(t, out, "before\n[status: running]", false)
		return true
	})
	expect(t, s.call("job_output", map[string]any{"job_id": id}), "(no new output)\n[status: running]", false)

	before := s.row("bash")
	s.reload(60000)
	after := s.row("bash")
	if !after.Since.After(before.Since) {
		t.Errorf("the bash row was not restarted: since %s → %s", before.Since, after.Since)
	}
	if proctest.Gone(pid) {
		t.Fatalf("the reload killed the remote command (pid %d)", pid)
	}
	expect(t, s.call("job_list", map[string]any{}), id+" [bash] running — "+job, false)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	expect(t, s.call("job_output", map[string]any{"job_id": id, "wait": true, "timeout_ms": 20000}),
		"after\n[stderr]\ndone-err\n[status: completed, exit code: 0]", false)

	// Killed through job_kill: SIGTERM to the remote group, nothing left.
	id = startJob(t, s, fmt.Sprintf(`sleep 300 & echo $$ > %s; echo ready; wait`, pidFile+"2"))
	pid = readPid(t, pidFile+"2")
	proctest.WaitFor(t, 20*time.Second, "ready", func() bool {
		return strings.HasPrefix(s.call("job_output", map[string]any{"job_id": id}).Text, "ready\n")
	})
	expect(t, s.call("job_kill", map[string]any{"job_id": id}), "requested cancellation of job "+id, false)
	expect(t, s.call("job_output", map[string]any{"job_id": id, "wait": true, "timeout_ms": 20000}), "(no new output)\n[status: killed, signal: SIGTERM]", false)
	if m := sshtest.GroupMembers(pid); len(m) > 0 {
		t.Errorf("remote processes of the killed job left: %v", m)
	}
}

// Item 5: sshd stopped mid-command: the foreground call ends with the loss, a job
// settles killed with it in its output, the status shows it; sshd started again: the
// next call works, the orphaned remote commands are killed, without restarting dsh.
func TestLostConnectionThroughTheTool(t *testing.T) {
	srv := sshtest.Start(t)
	s := newStack(t, srv)
	dir := t.TempDir()
	jobPidFile, fgPidFile := filepath.Join(dir, "job"), filepath.Join(dir, "fg")
	id := startJob(t, s, "echo $$ > "+jobPidFile+"; echo job-started; sleep 60")
	jobPid := readPid(t, jobPidFile)
	fg := make(chan tools.Result, 1)
	go func() { fg <- s.bash("echo $$ > "+fgPidFile+"; sleep 60", nil) }()
	fgPid := readPid(t, fgPidFile)

	srv.Stop()
	lost := "ssh: connection to " + srv.Addr + " lost: the server closed the connection"
	select {
	case res := <-fg:
		expect(t, res, "Error: "+lost, true)
	case <-time.After(20 * time.Second):
		t.Fatal("the foreground call did not end after the connection was lost")
	}
	expect(t, s.call("job_output", map[string]any{"job_id": id, "wait": true, "timeout_ms": 20000}),
		"job-started\n[stderr]\n"+lost+"\n[status: killed, killed before exit]", false)
	var detail string
	if !proctest.Until(10*time.Second, func() bool {
		detail = s.row("ssh").Detail
		return strings.Contains(detail, lost) && strings.Contains(detail, "2 remote commands to kill when reconnected")
	}) {
		t.Fatalf("the ssh row's detail does not show the loss of 2 commands: %q", detail)
	}
	res := s.bash("echo while-down", nil)
	if !res.IsError || res.Text != "Error: bash-ssh: spawn failed: connect "+srv.Addr+": ECONNREFUSED (connection refused)" {
		t.Errorf("call while sshd is down: %q", res.Text)
	}

	srv.Restart()
	expect(t, s.bash("echo back", nil), "back\n", false)
	proctest.WaitFor(t, 10*time.Second, "the orphaned remote commands to be killed", func() bool {
		return proctest.Gone(jobPid) && proctest.Gone(fgPid)
	})
	proctest.WaitFor(t, 10*time.Second, "the ssh row's detail to show the connection", func() bool {
		return strings.HasPrefix(s.row("ssh").Detail, "connected to "+srv.User+"@"+srv.Addr+" (")
	})
	id = startJob(t, s, "echo again")
	expect(t, s.call("job_output", map[string]any{"job_id": id, "wait": true, "timeout_ms": 20000}), "again\n[status: completed, exit code: 0]", false)
}

// Item 4 through a composition: the ssh row fails with the exact message; the rows that
// need it wait.
func TestUntrustedHostInAComposition(t *testing.T) {
	srv := sshtest.Start(t)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	srv.TrustHostKey(kh, sshtest.NewHostKey(t))
	rt := container.NewRuntime(catalog(t), container.Options{Logger: quietLogger()})
	defer rt.Close()
	err := rt.Compose("t", []container.Row{
		{ID: "tools", Plugin: "tools"}, {ID: "prompt", Plugin: "prompt"},
		{ID: "shell-env", Plugin: "shell-env", Config: map[string]any{"dshHome": t.TempDir()}},
		{ID: "ssh", Plugin: "ssh", Config: srv.Config(map[string]any{"knownHostsFile": kh})},
		{ID: "bash", Plugin: "bash-ssh"},
		{ID: "tool-bash", Plugin: "tool-bash"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "ssh: host key for " + srv.Addr + " is not trusted by " + kh
	for _, r := range rt.Status().Rows {
		switch r.ID {
		case "ssh":
			if r.State != container.StateFailed || r.Error != want {
				t.Errorf("ssh row: %s %q, want failed %q", r.State, r.Error, want)
			}
		case "bash", "tool-bash":
			if r.State != container.StatePending {
				t.Errorf("%s row: %s, want pending", r.ID, r.State)
			}
		}
	}
}

// Disposing the ssh row kills the remote commands it owns (the executor row waits for
// a new ssh row); a job running there settles killed.
func TestSSHRowDisposalKills(t *testing.T) {
	srv := sshtest.Start(t)
	s := newStack(t, srv)
	pidFile := filepath.Join(t.TempDir(), "pid")
	id := startJob(t, s, "echo $$ > "+pidFile+"; trap '' TERM; sleep 60")
	pid := readPid(t, pidFile)
	if err := s.rt.Unmount("ssh"); err != nil {
		t.Fatal(err)
	}
	if r := s.row("bash"); r.State != container.StatePending || len(r.Missing) != 1 || r.Missing[0] != "ssh" {
		t.Errorf("bash row after the ssh row went: %s missing %v", r.State, r.Missing)
	}
	if m := sshtest.GroupMembers(pid); len(m) > 0 || !proctest.Gone(pid) {
		t.Errorf("remote processes left after the ssh row was disposed: %v", m)
	}
	v, _ := container.Lookup(s.rt, jobs.Service)
	snap, err := v.Wait(context.Background(), s.session, id, 10*time.Second)
	if err != nil || snap.Status != jobs.StatusKilled {
		t.Errorf("job after disposal: %+v %v", snap, err)
	}
}

// bash-ssh's config is bash-local's keys, with its own name in the messages.
func TestConfig(t *testing.T) {
	rt := container.NewRuntime(catalog(t), container.Options{Logger: quietLogger()})
	defer rt.Close()
	for _, c := range []struct {
		config map[string]any
		want   string
	}{
		{map[string]any{"timeoutMs": 0}, "bash-ssh: timeoutMs must be a positive finite number"},
		{map[string]any{"graceMs": 3e9}, "bash-ssh: graceMs must be no greater than 2147483647"},
		{map[string]any{"maxOutputBytes": "big"}, `bash-ssh: maxOutputBytes must be a positive finite number, got the string "big"`},
		{map[string]any{"sandbox": "x"}, `unknown key "sandbox"`},
		// Resource limits are this host's cgroups: refused, never silently ignored.
		{map[string]any{"limits": map[string]any{"memory": "1GiB"}}, "bash-ssh: " + bashexec.ErrRemoteLimits.Error()},
		{map[string]any{"limits": map[string]any{}}, "bash-ssh: limits are not enforced on a remote host"},
	} {
		err := rt.Compose("t", []container.Row{{ID: "bash", Plugin: "bash-ssh", Config: c.config}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config %v: %v, want %q", c.config, err, c.want)
		}
	}
}
