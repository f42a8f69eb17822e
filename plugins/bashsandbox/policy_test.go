package bashsandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
	"github.com/dsh-dev/dsh/plugins/prompt"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/shell"
)

func code(n int) *int { return &n }

func TestClassify(t *testing.T) {
	cases := []struct {
		name   string
		code   *int
		stderr string
		want   bashsandbox.Verdict
	}{
		{"success", code(0), "touch: cannot touch 'x': Permission denied\n", bashsandbox.Verdict{}},
		{"EACCES", code(1), "touch: cannot touch '/w/x': Permission denied\n", bashsandbox.Verdict{Denied: true}},
		{"EROFS", code(1), "cp: cannot create regular file 'y': Read-only file system\n", bashsandbox.Verdict{Denied: true}},
		{"EPERM", code(1), "bash: line 1: kill: (42) - Operation not permitted\n", bashsandbox.Verdict{Denied: true}},
		{"among other lines", code(2), "building\nerror: open out.o: Permission denied\ndone\n", bashsandbox.Verdict{Denied: true}},
		{"ordinary failure", code(1), "grep: no match\n", bashsandbox.Verdict{}},
		{"denial text on stdout only", code(1), "", bashsandbox.Verdict{}},
		{"signal death with denial text", nil, "Permission denied\n", bashsandbox.Verdict{}},
		{"launcher failure", code(125), "dsh-sandbox: landlock: no such file or directory\n", bashsandbox.Verdict{LauncherFailed: true}},
		{"launcher failure mentioning a denial", code(125), "dsh-sandbox: exec /w/x: Permission denied\n", bashsandbox.Verdict{LauncherFailed: true}},
		{"125 without the line", code(125), "Permission denied\n", bashsandbox.Verdict{Denied: true}},
		{"125 with the line among others", code(125), "dsh-sandbox: x\nmore\n", bashsandbox.Verdict{}},
		{"the line without exit 125", code(1), "dsh-sandbox: x\n", bashsandbox.Verdict{}},
		{"the line without its newline", code(125), "dsh-sandbox: x", bashsandbox.Verdict{}},
	}
	for _, tc := range cases {
		if got := bashsandbox.Classify(tc.code, tc.stderr); got != tc.want {
			t.Errorf("%s: Classify = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestFacts(t *testing.T) {
	denied := shell.RunResult{ExitCode: code(1), Stderr: shell.StreamResult{Text: "x: Permission denied\n"}}
	failure := shell.RunResult{ExitCode: code(125), Stderr: shell.StreamResult{Text: "dsh-sandbox: exec bash: Permission denied\n"}}
	truncated := shell.RunResult{ExitCode: code(125), Stderr: shell.StreamResult{Text: "dsh-sandbox: Permission denied\n", Truncated: true}}

	if f := bashsandbox.Facts(shell.ModeReadOnly, "full", denied, false); *f != (shell.SandboxFacts{Mode: "read-only", Denied: true, Enforcement: "full"}) {
		t.Errorf("denied: %+v", *f)
	}
	if f := bashsandbox.Facts(shell.ModeWorkspaceWrite, "partial", failure, true); *f != (shell.SandboxFacts{Mode: "workspace-write", RunnerFailed: true, Enforcement: "partial"}) {
		t.Errorf("launcher failure: %+v", *f)
	}
	if f := bashsandbox.Facts(shell.ModeReadOnly, "full", truncated, true); f.RunnerFailed || !f.Denied {
		t.Errorf("a truncated stream cannot be the launcher's one line: %+v", *f)
	}
	// The failure line itself, written by a command that ran: not a launcher failure.
	if f := bashsandbox.Facts(shell.ModeWorkspaceWrite, "full", failure, false); f.RunnerFailed || !f.Denied {
		t.Errorf("a command imitating the failure line: %+v", *f)
	}
	if f := bashsandbox.Facts(shell.ModeDangerFullAccess, "", denied, false); *f != (shell.SandboxFacts{Mode: "danger-full-access"}) {
		t.Errorf("danger-full-access: %+v", *f)
	}
}

// Missing: what each backend lacks on a kernel with a given Landlock ABI; nothing for
// the namespace backend on this kernel (enforcement "full").
func TestMissing(t *testing.T) {
	abi := bashsandbox.KernelABI()
	if abi < 6 {
		t.Skipf("Landlock ABI %d", abi)
	}
	if m := bashsandbox.Missing(bashsandbox.BackendNamespaces, abi, bashsandbox.NetworkDeny, true); len(m) != 0 && bashsandbox.SeccompSupported {
		t.Fatalf("namespaces on ABI %d miss %q", abi, m)
	}
	ll := bashsandbox.Missing(bashsandbox.BackendLandlock, abi, bashsandbox.NetworkDeny, true)
	want := []string{bashsandbox.MissingProtectedPaths, bashsandbox.MissingSpillPrivacy, bashsandbox.MissingSecretFiles, bashsandbox.MissingMetadata, bashsandbox.MissingNestedUserns}
	if os.Geteuid() != 0 {
		want = append(want, bashsandbox.MissingBoundingSet)
	}
	want = append(want, cgroupMissing()...)
	if !slices.Equal(ll, want) {
		t.Fatalf("Landlock only: %q, want %q", ll, want)
	}
	if m := bashsandbox.Missing(bashsandbox.BackendLandlock, abi, bashsandbox.NetworkDeny, false); slices.Contains(m, bashsandbox.MissingNestedUserns) {
		t.Fatalf("a host without user namespaces cannot lose them: %q", m)
	}
	for _, tc := range []struct {
		abi     int
		network string
		want    []string
	}{
		{2, bashsandbox.NetworkAllow, []string{bashsandbox.MissingTruncate, bashsandbox.MissingSignalScope}},
		{3, bashsandbox.NetworkDeny, []string{bashsandbox.MissingTCP, bashsandbox.MissingSignalScope}},
		{5, bashsandbox.NetworkDeny, []string{bashsandbox.MissingSignalScope}},
		{6, bashsandbox.NetworkDeny, nil},
	} {
		got := bashsandbox.Missing(bashsandbox.BackendNamespaces, tc.abi, tc.network, true)
		if !bashsandbox.SeccompSupported && tc.network == bashsandbox.NetworkDeny {
			tc.want = append(tc.want, bashsandbox.MissingSocketFilter)
		}
		if !bashsandbox.SeccompSupported {
			tc.want = append(tc.want, bashsandbox.MissingKeyringFilter)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("ABI %d, network %s: %q, want %q", tc.abi, tc.network, got, tc.want)
		}
	}
}

// cgroupMissing is what the Landlock-only backend misses here of keeping commands in
// their cgroup (the namespace backend masks the cgroup file systems).
func cgroupMissing() []string {
	switch {
	case !bashsandbox.SeccompSupported:
		return []string{bashsandbox.MissingCgroupFilter}
	case !bashsandbox.HoldAtExec():
		return []string{bashsandbox.MissingCgroupHold}
	}
	return nil
}

func TestSandboxConfig(t *testing.T) {
	c := bashsandbox.DefaultSandboxConfig()
	if c.DefaultMode != "read-only" || c.Network != "deny" || c.Namespaces != "auto" || c.WritableRoots != nil {
		t.Fatalf("defaults: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		c    bashsandbox.SandboxConfig
		want string
	}{
		{bashsandbox.SandboxConfig{DefaultMode: "full", Network: "deny", Namespaces: "auto"}, `defaultMode must be one of "read-only", "workspace-write" or "danger-full-access", got "full"`},
		{bashsandbox.SandboxConfig{DefaultMode: "read-only", Network: "off", Namespaces: "auto"}, `network must be "deny" or "allow", got "off"`},
		{bashsandbox.SandboxConfig{DefaultMode: "read-only", Network: "deny", Namespaces: ""}, `namespaces must be "auto" or "off", got ""`},
	}
	for _, tc := range bad { // the container names the plugin in front (TestConfigValidation)
		if err := tc.c.Validate(); err == nil || err.Error() != tc.want {
			t.Errorf("Validate(%+v) = %v, want %q", tc.c, err, tc.want)
		}
	}
}

func TestResolver(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(base, "real")
	configured := filepath.Join(base, "configured")
	for _, d := range []string{real, configured} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}

	r, err := bashsandbox.NewResolver(shell.ModeReadOnly, configured)
	if err != nil {
		t.Fatal(err)
	}
	var _ shell.PolicyResolver = r
	if r.DefaultMode() != "read-only" {
		t.Fatalf("DefaultMode = %q", r.DefaultMode())
	}
	cases := []struct {
		name      string
		session   *container.Session
		requested string
		want      shell.SandboxPolicy
	}{
		{"no session: default mode, configured root", nil, "", shell.SandboxPolicy{Mode: "read-only", WorkspaceRoot: configured}},
		{"session cwd through a symlink is canonical", &container.Session{Cwd: link}, "", shell.SandboxPolicy{Mode: "read-only", WorkspaceRoot: real}},
		{"session cwd with dot-dot", &container.Session{Cwd: link + "/../real/."}, "", shell.SandboxPolicy{Mode: "read-only", WorkspaceRoot: real}},
		{"session override", &container.Session{Cwd: real, SandboxMode: "workspace-write"}, "", shell.SandboxPolicy{Mode: "workspace-write", WorkspaceRoot: real}},
		{"approved escalation beats the override", &container.Session{Cwd: real, SandboxMode: "workspace-write"}, "danger-full-access", shell.SandboxPolicy{Mode: "danger-full-access", WorkspaceRoot: real}},
		{"escalation without a session", nil, "workspace-write", shell.SandboxPolicy{Mode: "workspace-write", WorkspaceRoot: configured}},
		{"a narrower override is respected", &container.Session{SandboxMode: "read-only"}, "", shell.SandboxPolicy{Mode: "read-only", WorkspaceRoot: configured}},
	}
	for _, tc := range cases {
		got, err := r.Resolve(tc.session, tc.requested)
		if err != nil || got != tc.want {
			t.Errorf("%s: Resolve = %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}

	ww, _ := bashsandbox.NewResolver(shell.ModeWorkspaceWrite, configured)
	if got, _ := ww.Resolve(&container.Session{Cwd: real}, ""); got.Mode != "workspace-write" {
		t.Errorf("default workspace-write: %+v", got)
	}

	for _, tc := range []struct {
		name      string
		session   *container.Session
		requested string
		want      string
	}{
		{"unknown requested mode", nil, "everything", `bash-sandbox: unknown sandbox mode "everything"`},
		{"unknown override", &container.Session{SandboxMode: "rw"}, "", `bash-sandbox: unknown sandbox mode "rw"`},
		{"missing cwd", &container.Session{Cwd: filepath.Join(base, "gone")}, "", "bash-sandbox: workspace root: "},
		{"cwd is a file", &container.Session{Cwd: "/etc/passwd"}, "", "is not a directory"},
	} {
		if _, err := r.Resolve(tc.session, tc.requested); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := bashsandbox.NewResolver("loose", ""); err == nil {
		t.Error("NewResolver accepted an unknown default mode")
	}
	wd, _ := os.Getwd()
	cwdDefault, err := bashsandbox.NewResolver(shell.ModeReadOnly, "")
	if err != nil {
		t.Fatal(err)
	}
	canonWd, _ := filepath.EvalSymlinks(wd)
	if got, err := cwdDefault.Resolve(nil, ""); err != nil || got.WorkspaceRoot != canonWd {
		t.Errorf("empty configured root: %+v, %v; want the working directory %q", got, err, canonWd)
	}
}

func TestPolicyPrompt(t *testing.T) {
	want := map[string]string{
		"read-only":          `Current DSH file policy: read-only. Any available operation enforced by the DSH file sandbox may read files but may not modify them, including under the session workspace: "/home/u/proj". Only pseudo-devices such as /dev/null are writable.`,
		"workspace-write":    `Current DSH file policy: workspace-write. Any available operation enforced by the DSH file sandbox may modify files under the session workspace: "/home/u/proj". Some platform temporary areas may also be writable.`,
		"danger-full-access": `Current DSH file policy: danger-full-access. The DSH file sandbox enforces nothing: any available operation may modify files anywhere the harness user can, including under the session workspace: "/home/u/proj".`,
	}
	for mode, text := range want {
		if got := bashsandbox.PolicyPrompt(mode, "/home/u/proj"); got != text {
			t.Errorf("%s:\n got %q\nwant %q", mode, got, text)
		}
	}
	if got := bashsandbox.PolicyPrompt("nope", "/x"); got != "" {
		t.Errorf("unknown mode: %q", got)
	}
}

// TestPromptSectionPerSession composes the section through the real prompt registry:
// each session sees its own standing mode and canonical workspace.
func TestPromptSectionPerSession(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	link := filepath.Join(base, "link")
	if err := os.Symlink(base, link); err != nil {
		t.Fatal(err)
	}
	r, err := bashsandbox.NewResolver(shell.ModeWorkspaceWrite, base)
	if err != nil {
		t.Fatal(err)
	}
	reg := prompt.NewRegistry()
	scope := &testScope{}
	defer scope.end()
	sec := bashsandbox.PromptSection(r, nil)
	if sec.Name != "sandbox:policy" || sec.Order != 110 {
		t.Fatalf("section %q order %d", sec.Name, sec.Order)
	}
	if err := reg.Add(scope, sec); err != nil {
		t.Fatal(err)
	}
	if got, want := reg.Compose(&container.Session{Cwd: link}), bashsandbox.PolicyPrompt("workspace-write", base); got != want {
		t.Errorf("default session:\n got %q\nwant %q", got, want)
	}
	if got, want := reg.Compose(&container.Session{Cwd: base, SandboxMode: "read-only"}), bashsandbox.PolicyPrompt("read-only", base); got != want {
		t.Errorf("overridden session:\n got %q\nwant %q", got, want)
	}
	if got, want := reg.Compose(nil), bashsandbox.PolicyPrompt("workspace-write", base); got != want {
		t.Errorf("no session:\n got %q\nwant %q", got, want)
	}
	gone := filepath.Join(base, "gone")
	if got, want := reg.Compose(&container.Session{Cwd: gone, SandboxMode: "read-only"}), bashsandbox.PolicyPrompt("read-only", gone); got != want {
		t.Errorf("unresolvable workspace:\n got %q\nwant %q", got, want)
	}
}

// testScope is a minimal container.Scope.
type testScope struct{ fns []func() }

func (s *testScope) Defer(fn func())          { s.fns = append(s.fns, fn) }
func (s *testScope) Context() context.Context { return context.Background() }
func (s *testScope) end() {
	for i := len(s.fns) - 1; i >= 0; i-- {
		s.fns[i]()
	}
}

// A session's state (its pinned workspace, its sandboxes) lives as long as the
// Supervisor it spawns through, not longer: closing the Supervisor ends every session
// of it, also those that never started a sandbox.
func TestSessionsEndWithTheirSupervisor(t *testing.T) {
	sup := subprocess.New(subprocess.Options{SpillRoot: t.TempDir(), Logger: quietLogger()})
	defer sup.Close()
	cfg := bashsandbox.DefaultConfig()
	cfg.DefaultMode = shell.ModeDangerFullAccess
	_, resolver, err := bashsandbox.New(sup, cfg, quietLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"one", "two"} {
		if _, err := resolver.Resolve(session(id, workspace(t)), ""); err != nil {
			t.Fatal(err)
		}
	}
	if n := bashsandbox.Sessions(sup); n != 2 {
		t.Fatalf("%d sessions before the close, want 2", n)
	}
	sup.Close()
	if n := bashsandbox.Sessions(sup); n != 0 {
		t.Errorf("%d sessions outlived their Supervisor", n)
	}
}
