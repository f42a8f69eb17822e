package bashsandbox_test

import (
	"path/filepath"
	"strings"
	"testing"

	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
)

// The probe finds the namespace backend on this host (user namespaces and Landlock
// work), is cached, and leaves nothing behind.
func TestProbe(t *testing.T) {
	noProcessLeft(t)
	tmp := t.TempDir() // of its own: other tests' dsh processes probe in the host's
	t.Setenv("TMPDIR", tmp)
	defer bashsandbox.ForgetProbe()() // probe now, not from an earlier test's cache
	first := bashsandbox.Probe()
	if !first.Usable || first.Reason != "" || first.Backend != bashsandbox.BackendNamespaces || !first.Namespaces ||
		first.ABI != bashsandbox.KernelABI() || first.ABI < 1 {
		t.Fatalf("Probe on a host with Landlock and user namespaces: %+v", first)
	}
	if again := bashsandbox.Probe(); again != first {
		t.Fatalf("the cached probe changed: %+v then %+v", first, again)
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "dsh-sandbox-probe-*"))
	if len(left) != 0 {
		t.Fatalf("probe directories left behind: %q", left)
	}
}

// The fail-closed error: the contract sentence, what to do, and the probe's reason.
func TestUnavailableError(t *testing.T) {
	err := &bashsandbox.UnavailableError{Mode: "workspace-write", Reason: "forced by the test"}
	want := `sandbox mode "workspace-write" is requested but no sandbox backend is usable on this host; refusing to run the command unconfined. ` +
		`To fix this, run dsh on Linux 5.13 or newer with Landlock enabled (CONFIG_SECURITY_LANDLOCK=y and "landlock" in the kernel's lsm= list), or, if running commands unconfined is acceptable, switch the profile's executor to bash-local.` +
		` (sandbox probe: forced by the test)`
	if err.Error() != want {
		t.Fatalf("error:\n got %s\nwant %s", err, want)
	}
	if got := (&bashsandbox.UnavailableError{Mode: "read-only"}).Error(); got != `sandbox mode "read-only" is requested but no sandbox backend is usable on this host; refusing to run the command unconfined. `+bashsandbox.Remedy {
		t.Fatalf("without a reason: %q", got)
	}
}

// A binary whose main does not dispatch the sandbox must not be re-executed as one (it
// would run its ordinary main — a test binary its tests, recursively): the probe says
// so without starting anything, and confined calls fail closed.
func TestNotDispatchedStartsNothing(t *testing.T) {
	noProcessLeft(t)
	restore := bashsandbox.SetDispatched(false)
	defer restore()
	const want = "bash-sandbox: this binary does not dispatch the sandbox: its main (or TestMain) must call bashsandbox.MaybeRunLauncher first"
	if r := bashsandbox.Probe(); r.Usable || r.Reason != want {
		t.Fatalf("Probe: %+v", r)
	}
	if len(children()) != 0 {
		t.Fatal("the probe started a process")
	}
	st := newStack(t, stackSetup{})
	ws := workspace(t)
	res := st.bash(t, session("undispatched", ws), "touch "+ws+"/marker")
	if !res.IsError || !strings.Contains(res.Text, "no sandbox backend is usable on this host") || !strings.HasSuffix(res.Text, "(sandbox probe: "+want+")") {
		t.Fatalf("result %q", res.Text)
	}
	if exists(ws + "/marker") {
		t.Fatal("the command ran")
	}
}
