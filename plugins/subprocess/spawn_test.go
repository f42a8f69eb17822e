package subprocess_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
)

func TestSpawnRejectsInvalidInputBeforeAnythingRuns(t *testing.T) {
	proctest.NoLeftovers(t)
	sup := newSup(t, false)
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	valid := func() subprocess.Spec { return bashSpec("touch " + ran) }
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	caused, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(errors.New("the user pressed stop"))

	cases := []struct {
		name string
		ctx  context.Context
		edit func(*subprocess.Spec)
		want string
	}{
		{"nil argv", nil, func(s *subprocess.Spec) { s.Argv = nil }, "invalid argv: expected a non-empty program name at argv[0]"},
		{"empty program", nil, func(s *subprocess.Spec) { s.Argv = []string{"", "-c", "touch " + ran} }, "invalid argv: expected a non-empty program name at argv[0]"},
		{"zero grace", nil, func(s *subprocess.Spec) { s.GraceMs = 0 }, "invalid graceMs: expected 0 < graceMs <= 2147483647, got 0"},
		{"negative grace", nil, func(s *subprocess.Spec) { s.GraceMs = -1 }, "invalid graceMs: expected 0 < graceMs <= 2147483647, got -1"},
		{"grace too large", nil, func(s *subprocess.Spec) { s.GraceMs = 2147483648 }, "invalid graceMs: expected 0 < graceMs <= 2147483647, got 2147483648"},
		{"zero stdout cap", nil, func(s *subprocess.Spec) { s.Stdout.MaxBytes = 0 }, "invalid stdout capture: maxBytes must be positive, got 0"},
		{"negative stderr spill cap", nil, func(s *subprocess.Spec) { s.Stderr.SpillMaxBytes = -1 }, "invalid stderr capture: spillMaxBytes must not be negative, got -1"},
		{"env name with =", nil, func(s *subprocess.Spec) { s.Env = map[string]string{"A=B": "x"} }, `invalid env: invalid variable name "A=B"`},
		{"env value with NUL", nil, func(s *subprocess.Spec) { s.Env = map[string]string{"A": "x\x00y"} }, `invalid env: variable "A" contains a NUL byte`},
		{"unmanaged dshEnv key", nil, func(s *subprocess.Spec) { s.DshEnv = map[string]string{"HOME": "/x"} }, `invalid dshEnv: key "HOME" is not a DSH_* name`},
		{"cancelled context", cancelled, nil, "aborted before spawn: context canceled"},
		{"cancelled with a cause", caused, nil, "aborted before spawn: the user pressed stop"},
	}
	fds := proctest.FDs(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := valid()
			if c.edit != nil {
				c.edit(&spec)
			}
			ctx := c.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			p, err := sup.Spawn(ctx, spec)
			if err == nil {
				<-p.Done()
				t.Fatalf("Spawn succeeded, want %q", c.want)
			}
			if p != nil {
				t.Errorf("Spawn returned a process with its error")
			}
			if err.Error() != c.want {
				t.Errorf("error = %q\nwant    %q", err, c.want)
			}
		})
	}
	if _, err := os.Stat(ran); !os.IsNotExist(err) {
		t.Errorf("a rejected spawn ran its command (stat: %v)", err)
	}
	if leaked := proctest.NewFDs(fds, proctest.FDs(t)); len(leaked) != 0 {
		t.Errorf("rejected spawns leaked fds: %v", leaked)
	}
}

func TestSpawnFailuresNameTheErrno(t *testing.T) {
	proctest.NoLeftovers(t)
	sup := newSup(t, false)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	cases := []struct {
		name  string
		edit  func(*subprocess.Spec)
		want  string
		errno syscall.Errno
	}{
		{"missing workdir", func(s *subprocess.Spec) { s.Dir = missing },
			"spawn failed: chdir " + missing + ": ENOENT (no such file or directory)", syscall.ENOENT},
		{"workdir is a file", func(s *subprocess.Spec) { s.Dir = file },
			"spawn failed: chdir " + file + ": ENOTDIR (not a directory)", syscall.ENOTDIR},
		{"missing program path", func(s *subprocess.Spec) { s.Argv = []string{missing} },
			"spawn failed: exec " + missing + ": ENOENT (no such file or directory)", syscall.ENOENT},
		{"program not in PATH", func(s *subprocess.Spec) { s.Argv = []string{"dsh-no-such-program"} },
			"spawn failed: exec dsh-no-such-program: executable file not found in $PATH", 0},
	}
	fds := proctest.FDs(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := bashSpec("true")
			c.edit(&spec)
			p, err := sup.Spawn(context.Background(), spec)
			if err == nil {
				<-p.Done()
				t.Fatal("Spawn succeeded")
			}
			var se *proc.SpawnError
			if !errors.As(err, &se) {
				t.Fatalf("error %v (%T) is not a *SpawnError", err, err)
			}
			if err.Error() != c.want {
				t.Errorf("error = %q\nwant    %q", err, c.want)
			}
			if c.errno != 0 && !errors.Is(err, c.errno) {
				t.Errorf("errors.Is(%v, %v) = false", err, c.errno)
			}
		})
	}
	// The Supervisor's shared /dev/null (the stdin of commands without one) is its own,
	// opened at its first spawn; nothing else may be left.
	var leaked []string
	for _, fd := range proctest.NewFDs(fds, proctest.FDs(t)) {
		if !strings.HasSuffix(fd, "→ /dev/null") {
			leaked = append(leaked, fd)
		}
	}
	if len(leaked) != 0 {
		t.Errorf("failed spawns leaked fds: %v", leaked)
	}
	if sup.UsesCgroups() {
		entries, _ := os.ReadDir(strings.TrimPrefix(sup.Isolation(), "cgroup v2 at "))
		for _, e := range entries {
			if e.IsDir() {
				t.Errorf("cgroup %s left behind by a failed spawn", e.Name())
			}
		}
	}
}

// The child leads its own session and process group and has no controlling terminal.
func TestChildLeadsANewSessionWithoutTerminal(t *testing.T) {
	forModes(t, func(t *testing.T, sup *subprocess.Supervisor) {
		// bash execs the single command, so $$ is the pid of the process that reads stat.
		p := spawn(t, sup, bashSpec("exec cat /proc/$$/stat"))
		ex := proctest.AwaitExit(t, p, 10*time.Second)
		if proctest.Code(ex) != 0 {
			t.Fatalf("exit %v, stderr %q", ex, p.Stderr().Output().Text)
		}
		stat := p.Stdout().Output().Text
		fields := strings.Fields(stat[strings.LastIndexByte(stat, ')')+2:])
		pid := strconv.Itoa(p.Pid())
		if pgrp, sid, tty := fields[2], fields[3], fields[4]; pgrp != pid || sid != pid || tty != "0" {
			t.Errorf("pid %s: pgrp %s, session %s, tty_nr %s; want pgrp = session = pid and no tty", pid, pgrp, sid, tty)
		}

		tty := spawn(t, sup, bashSpec("read x </dev/tty"))
		ex = proctest.AwaitExit(t, tty, 10*time.Second)
		if proctest.Code(ex) == 0 || !strings.Contains(tty.Stderr().Output().Text, "/dev/tty") {
			t.Errorf("read </dev/tty: exit %v, stderr %q; want a fast failure", ex, tty.Stderr().Output().Text)
		}
	})
}

func TestStdin(t *testing.T) {
	proctest.NoLeftovers(t)
	sup := newSup(t, false)
	t.Run("nil is /dev/null", func(t *testing.T) {
		p := spawn(t, sup, bashSpec("cat; echo end"))
		ex := proctest.AwaitExit(t, p, 10*time.Second)
		if got := p.Stdout().Output().Text; got != "end\n" || proctest.Code(ex) != 0 {
			t.Errorf("stdout %q exit %d", got, proctest.Code(ex))
		}
	})
	t.Run("bytes written once then closed", func(t *testing.T) {
		spec := bashSpec("cat; echo end")
		spec.Stdin = []byte("hello\n")
		p := spawn(t, sup, spec)
		proctest.AwaitExit(t, p, 10*time.Second)
		if got := p.Stdout().Output().Text; got != "hello\nend\n" {
			t.Errorf("stdout %q", got)
		}
	})
	t.Run("empty is an immediate EOF", func(t *testing.T) {
		spec := bashSpec("cat; echo end")
		spec.Stdin = []byte{}
		p := spawn(t, sup, spec)
		proctest.AwaitExit(t, p, 10*time.Second)
		if got := p.Stdout().Output().Text; got != "end\n" {
			t.Errorf("stdout %q", got)
		}
	})
	t.Run("larger than the pipe buffer", func(t *testing.T) {
		spec := bashSpec("wc -c")
		spec.Stdin = make([]byte, 1<<20)
		p := spawn(t, sup, spec)
		proctest.AwaitExit(t, p, 10*time.Second)
		if got := strings.TrimSpace(p.Stdout().Output().Text); got != "1048576" {
			t.Errorf("wc -c = %q", got)
		}
	})
	t.Run("never read", func(t *testing.T) {
		spec := bashSpec("exit 0")
		spec.Stdin = make([]byte, 1<<20)
		p := spawn(t, sup, spec)
		if ex := proctest.AwaitExit(t, p, 10*time.Second); proctest.Code(ex) != 0 {
			t.Errorf("exit %v", ex)
		}
	})
}

func parseEnv(t *testing.T, out string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, kv := range strings.Split(out, "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

func TestEnvironmentMerge(t *testing.T) {
	proctest.NoLeftovers(t)
	secrets := map[string]string{
		"FOO_API_KEY":    "k1",
		"MY_SECRET":      "s1",
		"GH_TOKEN":       "t1",
		"DB_PASSWORD":    "p1",
		"lower_token":    "t2",
		"Keyring_Path":   "x",
		"DSH_SESSION_ID": "spoof",
		"DSH_HOME":       "/stale/home",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	t.Setenv("PLAIN_SETTING", "kept")
	t.Setenv("TERM", "xterm-256color")
	t.Setenv("GIT_PAGER", "less")
	before := os.Environ()

	sup := newSup(t, false)
	spec := bashSpec("env -0")
	spec.Env = map[string]string{"CALLER_VAR": "c", "PAGER": "more", "DSH_FROM_CALLER": "caller", "DSH_BOTH": "caller"}
	spec.DshEnv = map[string]string{"DSH_SESSION_ID": "managed", "DSH_BOTH": "managed"}
	p := spawn(t, sup, spec)
	proctest.AwaitExit(t, p, 10*time.Second)
	env := parseEnv(t, p.Stdout().Output().Text)

	for k := range secrets {
		if k == "DSH_SESSION_ID" {
			continue
		}
		if v, ok := env[k]; ok {
			t.Errorf("%s=%q reached the child", k, v)
		}
	}
	want := map[string]string{
		"DSH_SESSION_ID":      "managed", // the managed snapshot, not the spoof
		"DSH_BOTH":            "managed", // managed wins over the caller's env
		"DSH_FROM_CALLER":     "caller",
		"CALLER_VAR":          "c",
		"PAGER":               "more", // the caller's env comes after the overrides
		"PATH":                os.Getenv("PATH"),
		"HOME":                os.Getenv("HOME"),
		"PLAIN_SETTING":       "kept",
		"NO_COLOR":            "1",
		"TERM":                "dumb",
		"GIT_PAGER":           "cat",
		"GIT_TERMINAL_PROMPT": "0",
		proctest.MarkerVar:    os.Getenv(proctest.MarkerVar),
	}
	for k, v := range want {
		if got, ok := env[k]; !ok || got != v {
			t.Errorf("%s = %q (present %v), want %q", k, got, ok, v)
		}
	}
	after := os.Environ()
	slices.Sort(before)
	slices.Sort(after)
	if !slices.Equal(before, after) {
		t.Errorf("the harness environment changed")
	}
	if os.Getenv("DSH_SESSION_ID") != "spoof" || os.Getenv("GH_TOKEN") != "t1" {
		t.Errorf("the harness's own variables were modified")
	}
}

// Each spawn sees the harness environment as it is then: the merged base is reused only
// while the harness environment is unchanged.
func TestEnvironmentFollowsTheHarness(t *testing.T) {
	proctest.NoLeftovers(t)
	sup := newSup(t, false)
	childEnv := func() map[string]string {
		p := spawn(t, sup, bashSpec("env -0"))
		proctest.AwaitExit(t, p, 10*time.Second)
		return parseEnv(t, p.Stdout().Output().Text)
	}
	t.Setenv("DSH_TEST_SETTING", "one")
	if got := childEnv()["DSH_TEST_SETTING"]; got != "" {
		t.Fatalf("a DSH_* harness variable reached the child: %q", got)
	}
	t.Setenv("PLAIN_SETTING", "one")
	if got := childEnv()["PLAIN_SETTING"]; got != "one" {
		t.Errorf("PLAIN_SETTING = %q, want one", got)
	}
	t.Setenv("PLAIN_SETTING", "two")
	t.Setenv("NEW_API_KEY", "secret")
	env := childEnv()
	if got := env["PLAIN_SETTING"]; got != "two" {
		t.Errorf("after a change, PLAIN_SETTING = %q, want two", got)
	}
	if got, ok := env["NEW_API_KEY"]; ok {
		t.Errorf("a credential set later reached the child: %q", got)
	}
	os.Unsetenv("PLAIN_SETTING")
	if got, ok := childEnv()["PLAIN_SETTING"]; ok {
		t.Errorf("an unset variable reached the child: %q", got)
	}
}

// A program name is looked up in PATH once and remembered; when the remembered file is
// gone, that spawn fails as a spawn error and the next one looks again.
func TestProgramLookupIsRememberedUntilItFails(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	write := func(dir, word string) {
		if err := os.WriteFile(filepath.Join(dir, "dsh-test-prog"), []byte("#!/bin/sh\necho "+word+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(a, "first")
	t.Setenv("PATH", a+":"+b+":"+os.Getenv("PATH"))
	sup := newSup(t, true)
	run := func() (string, error) {
		spec := bashSpec("")
		spec.Argv = []string{"dsh-test-prog"}
		p, err := sup.Spawn(context.Background(), spec)
		if err != nil {
			return "", err
		}
		proctest.AwaitExit(t, p, 10*time.Second)
		return p.Stdout().Output().Text, nil
	}
	if out, err := run(); out != "first\n" || err != nil {
		t.Fatalf("first run: %q %v", out, err)
	}
	os.Remove(filepath.Join(a, "dsh-test-prog"))
	write(b, "second")
	var se *proc.SpawnError
	if _, err := run(); !errors.As(err, &se) || !errors.Is(err, syscall.ENOENT) {
		t.Errorf("run after the remembered program vanished: %v; want a spawn error with ENOENT", err)
	}
	if out, err := run(); out != "second\n" || err != nil {
		t.Errorf("the next run looks again: %q %v", out, err)
	}
}
