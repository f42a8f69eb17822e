package bashsandbox_test

// The executor through the real stack (see stack_test.go): what each mode permits,
// the network, danger-full-access, failing closed, launcher failures.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/shell"
)

// Read-only denies `touch <workspace>/x` with the denial marker, the escalation hint and
// the exit code, in the bash tool's marker order; reading anywhere and writing /dev/null work.
func TestStackReadOnly(t *testing.T) {
	st := newStack(t, stackSetup{})
	ws := workspace(t)
	s := session("ro", ws)
	target := filepath.Join(ws, "x")

	res := st.bash(t, s, "touch "+target)
	expect(t, res, deniedText("touch: cannot touch '"+target+"': Permission denied", "read-only"), false)
	if !strings.HasSuffix(res.Text, "\n[sandbox: file access denied under read-only mode]\n"+escalationHint+"\n[exit code: 1]") {
		t.Fatalf("marker order: %q", res.Text)
	}
	roFull := enforcement(bashsandbox.NetworkDeny)
	if got, want := sandboxOf(t, res), sandboxJSON("read-only", true, roFull, false); got != want {
		t.Fatalf("sandbox value %s, want %s", got, want)
	}
	if v := res.Value.(toolbash.ForegroundValue); v.ExitCode == nil || *v.ExitCode != 1 {
		t.Fatalf("exit code %v", v.ExitCode)
	}
	if exists(target) {
		t.Fatal("read-only created a file in the workspace")
	}

	res = st.bash(t, s, `cat readme && head -c 1 /etc/passwd >/dev/null && ls / >/dev/null && echo read-ok && echo discarded > /dev/null && echo null-ok`)
	expect(t, res, "workspace file\nread-ok\nnull-ok\n", false)
	if got, want := sandboxOf(t, res), sandboxJSON("read-only", false, roFull, false); got != want {
		t.Fatalf("sandbox value %s, want %s", got, want)
	}
	// An ordinary failure under confinement is not a denial.
	expect(t, st.bash(t, s, "echo failing >&2; exit 3"), "[stderr]\nfailing\n[exit code: 3]", false)
}

// Workspace-write writes the workspace and the session's private /tmp; /etc, $HOME and
// /root stay read-only, and a symlink in the workspace pointing outside cannot be
// written through.
func TestStackWorkspaceWrite(t *testing.T) {
	st := newStack(t, stackSetup{bashConfig: map[string]any{"defaultMode": "workspace-write"}})
	ws := workspace(t)
	s := session("ww", ws)

	expect(t, st.bash(t, s, `echo one > a.txt && mkdir -p sub/deeper && mv a.txt sub/deeper/ && cat sub/deeper/a.txt`), "one\n", false)
	if b, err := os.ReadFile(filepath.Join(ws, "sub/deeper/a.txt")); err != nil || string(b) != "one\n" {
		t.Fatalf("workspace write: %q, %v", b, err)
	}
	res := st.bash(t, s, `f=$(mktemp) && echo data > "$f" && cat "$f" && rm "$f" && echo "$TMPDIR"`)
	expect(t, res, "data\n/tmp\n", false)
	if got, want := sandboxOf(t, res), sandboxJSON("workspace-write", false, enforcement(bashsandbox.NetworkDeny), false); got != want {
		t.Fatalf("sandbox value %s, want %s", got, want)
	}

	home, _ := os.UserHomeDir()
	seen := map[string]bool{}
	for _, dir := range []string{"/etc", home, "/root"} {
		if dir == "" || seen[dir] {
			continue
		}
		seen[dir] = true
		target := filepath.Join(dir, fmt.Sprintf("dsh-sandbox-test-%d", os.Getpid()))
		t.Cleanup(func() { os.Remove(target) })
		why := "Read-only file system"
		if dir == "/root" && os.Geteuid() != 0 {
			why = "Permission denied" // not even searchable by this user
		}
		expect(t, st.bash(t, s, "touch "+target), deniedText("touch: cannot touch '"+target+"': "+why, "workspace-write"), false)
		if exists(target) {
			t.Fatalf("workspace-write created %s", target)
		}
	}

	outside := outsideTempDir(t, "dsh-sandbox-outside-")
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("original\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(ws, "escape-file")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "escape-dir")); err != nil {
		t.Fatal(err)
	}
	expect(t, st.bash(t, s, "echo pwned > escape-file"), deniedText(bashPath(t)+": line 1: escape-file: Read-only file system", "workspace-write"), false)
	expect(t, st.bash(t, s, "touch escape-dir/new"), deniedText("touch: cannot touch 'escape-dir/new': Read-only file system", "workspace-write"), false)
	if b, _ := os.ReadFile(victim); string(b) != "original\n" || exists(filepath.Join(outside, "new")) {
		t.Fatalf("wrote outside the workspace through a symlink: victim %q", b)
	}
}

// With network deny (the default) a TCP connect to a listener on the host's 127.0.0.1
// fails in both confined modes (the sandbox has a network namespace of its own, whose
// loopback Landlock closes too); it works with network allow and in
// danger-full-access.
func TestStackNetwork(t *testing.T) {
	port, accepted := tcpListener(t)
	connect := "exec 3<>/dev/tcp/127.0.0.1/" + port + " && echo connected"
	ws := workspace(t)

	deny := newStack(t, stackSetup{})
	for _, mode := range []string{shell.ModeReadOnly, shell.ModeWorkspaceWrite} {
		s := &container.Session{ID: "net-" + mode, Cwd: ws, SandboxMode: mode}
		res := deny.bash(t, s, connect)
		want := "[stderr]\n" + bashPath(t) + ": connect: Permission denied\n" + bashPath(t) + ": line 1: /dev/tcp/127.0.0.1/" + port + ": Permission denied\n" +
			deniedMarker(mode) + "\n" + escalationHint + "\n[exit code: 1]"
		expect(t, res, want, false)
	}
	if n := accepted(); n != 0 {
		t.Fatalf("%d connections got through a denied network", n)
	}
	danger := &container.Session{ID: "net-danger", Cwd: ws, SandboxMode: shell.ModeDangerFullAccess}
	expect(t, deny.bash(t, danger, connect), "connected\n", false)

	allow := newStack(t, stackSetup{bashConfig: map[string]any{"network": "allow"}})
	for _, mode := range []string{shell.ModeReadOnly, shell.ModeWorkspaceWrite} {
		s := &container.Session{ID: "net-" + mode, Cwd: ws, SandboxMode: mode}
		res := allow.bash(t, s, connect)
		expect(t, res, "connected\n", false)
		if got, want := sandboxOf(t, res), sandboxJSON(mode, false, enforcement(bashsandbox.NetworkAllow), false); got != want {
			t.Fatalf("sandbox value %s, want %s", got, want)
		}
	}
	waitFor(t, "three accepted connections", func() bool { return accepted() == 3 })
}

// Danger-full-access runs unconfined and reports {mode: danger-full-access,
// denied: false}, even for a failure that reads like a denial.
func TestStackDangerFullAccess(t *testing.T) {
	st := newStack(t, stackSetup{bashConfig: map[string]any{"defaultMode": "danger-full-access"}})
	ws := workspace(t)
	outside := outsideTempDir(t, "dsh-sandbox-outside-")
	s := session("danger", ws)
	target := filepath.Join(outside, "written")
	res := st.bash(t, s, "touch "+target+" && grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\\t ' ' '")
	expect(t, res, "NoNewPrivs: 0\nSeccomp: 0\n", false)
	if !exists(target) {
		t.Fatal("danger-full-access did not write outside the workspace")
	}
	b, _ := json.Marshal(res.Value)
	// (The default limits have the value report the command's usage after it.)
	if !strings.Contains(string(b), `,"sandbox":{"mode":"danger-full-access","denied":false,"enforcement":"","runnerFailed":false}`) {
		t.Fatalf("value %s", b)
	}
	// EACCES outside any sandbox (a file without execute permission) is not a denial.
	if err := os.WriteFile(filepath.Join(ws, "noexec.sh"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res = st.bash(t, s, "./noexec.sh")
	expect(t, res, "[stderr]\n"+bashPath(t)+": line 1: ./noexec.sh: Permission denied\n[exit code: 126]", false)
	if got := sandboxOf(t, res); got != `{"mode":"danger-full-access","denied":false,"enforcement":"","runnerFailed":false}` {
		t.Fatalf("sandbox value %s", got)
	}
}

// With no usable backend, a confined call fails closed with the
// fail-closed message and nothing runs — foreground or background; danger-full-access needs
// no backend and still runs.
func TestStackFailClosed(t *testing.T) {
	restore := bashsandbox.ForceUnavailable("forced by the test")
	defer restore()
	st := newStack(t, stackSetup{})
	for _, row := range st.rt.Status().Rows {
		if row.ID == "bash" && row.Detail != "sandbox backend unavailable: calls in read-only or workspace-write mode fail closed (forced by the test)"+bashsandbox.DefaultLimitsDetail(true) {
			t.Fatalf("status detail %q", row.Detail)
		}
	}
	ws := workspace(t)
	s := session("closed", ws)
	marker := filepath.Join(ws, "marker")
	want := func(mode string) string {
		return `Error: sandbox mode "` + mode + `" is requested but no sandbox backend is usable on this host; refusing to run the command unconfined. ` +
			bashsandbox.Remedy + " (sandbox probe: forced by the test)"
	}
	expect(t, st.bash(t, s, "touch "+marker), want("read-only"), true)
	expect(t, st.bash(t, s, "touch "+marker, "run_in_background", true), want("read-only"), true)
	ww := &container.Session{ID: "closed-ww", Cwd: ws, SandboxMode: shell.ModeWorkspaceWrite}
	expect(t, st.bash(t, ww, "touch "+marker), want("workspace-write"), true)
	if exists(marker) {
		t.Fatal("the command ran although no sandbox backend is usable")
	}
	expect(t, st.call(t, s, "job_list", `{}`), "(no background jobs)", false)

	danger := &container.Session{ID: "closed-danger", Cwd: ws, SandboxMode: shell.ModeDangerFullAccess}
	expect(t, st.bash(t, danger, "touch "+marker+" && echo unconfined"), "unconfined\n", false)
}

// A box that cannot be built is a launcher failure: exit 125 and one
// "dsh-sandbox:" line, rendered as the launcher-failure marker, never a denial; the
// command did not run. Here a configured writable root vanished after the executor
// started, so the sandbox cannot bind it.
func TestStackLauncherFailure(t *testing.T) {
	extra := outsideTempDir(t, "dsh-sandbox-extra-")
	st := newStack(t, stackSetup{bashConfig: map[string]any{"defaultMode": "workspace-write", "writableRoots": []any{extra}}})
	if err := os.Remove(extra); err != nil {
		t.Fatal(err)
	}
	ws := workspace(t)
	marker := filepath.Join(ws, "marker")
	res := st.bash(t, session("launcher-failure", ws), "touch "+marker)
	want := "[stderr]\ndsh-sandbox: the session sandbox did not start: open_tree " + extra + ": no such file or directory\n" +
		"[sandbox: the sandbox runner itself failed under workspace-write mode — the command did not run; this is a sandbox problem, not a command failure]\n" +
		"[exit code: 125]"
	expect(t, res, want, false)
	if got, want := sandboxOf(t, res), sandboxJSON("workspace-write", false, enforcement(bashsandbox.NetworkDeny), true); got != want {
		t.Fatalf("sandbox value %s, want %s", got, want)
	}
	if exists(marker) {
		t.Fatal("the command ran although the sandbox did not start")
	}
	// A command exiting 125 by itself, imitating the line among other output, is an
	// ordinary failure.
	if err := os.Mkdir(extra, 0o755); err != nil {
		t.Fatal(err)
	}
	res = st.bash(t, session("launcher-imitation", ws), `echo "some output" >&2; echo "dsh-sandbox: fake" >&2; exit 125`)
	expect(t, res, "[stderr]\nsome output\ndsh-sandbox: fake\n[exit code: 125]", false)
	// So is one that writes exactly the failure line: only dsh knows whether the
	// launcher's failure mode ran.
	res = st.bash(t, session("launcher-imitation", ws), `touch `+marker+`; echo "dsh-sandbox: fake" >&2; exit 125`)
	expect(t, res, "[stderr]\ndsh-sandbox: fake\n[exit code: 125]", false)
	if got, want := sandboxOf(t, res), sandboxJSON("workspace-write", false, enforcement(bashsandbox.NetworkDeny), false); got != want || !exists(marker) {
		t.Fatalf("sandbox value %s, want %s (the command ran: %v)", got, want, exists(marker))
	}
}

// The launcher's failure mode itself: one line, exit 125, classified as a launcher failure.
func TestLauncherFailureMode(t *testing.T) {
	r := runArgv(t, t.TempDir(), os.Args[0], bashsandbox.FailArg, "the reason\nspans  lines")
	if r.exit() != bashsandbox.LauncherFailureExitCode || r.stderr != "dsh-sandbox: the reason spans lines\n" || r.stdout != "" {
		t.Fatalf("failure mode: %v", r)
	}
	if v := bashsandbox.Classify(r.code, r.stderr); !v.LauncherFailed || v.Denied {
		t.Fatalf("classified %+v", v)
	}
}
