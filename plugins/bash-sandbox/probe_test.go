package bashsandbox_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	bashsandbox "github.com/dsh-dev/dsh/plugins/bash-sandbox"
	"github.com/dsh-dev/dsh/plugins/shell"
)

func TestProbe(t *testing.T) {
	noProcessLeft(t)
	first := bashsandbox.Probe()
	if !first.Usable || first.Reason != "" || first.Backend != "landlock" || first.ABI != bashsandbox.KernelABI() || first.ABI < 1 {
		t.Fatalf("Probe on a Landlock host: %+v", first)
	}
	if again := bashsandbox.Probe(); again != first {
		t.Fatalf("the cached probe changed: %+v then %+v", first, again)
	}
	if err := bashsandbox.CheckBackend(shell.ModeReadOnly); err != nil {
		t.Fatal(err)
	}
	// The probe leaves no directory behind.
	left, _ := filepath.Glob(filepath.Join(os.TempDir(), "dsh-sandbox-probe-*"))
	if len(left) != 0 {
		t.Fatalf("probe directories left behind: %q", left)
	}
}

func TestForcedUnavailableFailsClosed(t *testing.T) {
	restore := bashsandbox.ForceUnavailable("forced by the test")
	r := bashsandbox.Probe()
	if r.Usable || r.Reason != "forced by the test" {
		restore()
		t.Fatalf("forced probe: %+v", r)
	}
	err := bashsandbox.CheckBackend(shell.ModeWorkspaceWrite)
	want := `sandbox mode "workspace-write" is requested but no sandbox backend is usable on this host; refusing to run the command unconfined. ` +
		`To fix this, run dsh on Linux 5.13 or newer with Landlock enabled (CONFIG_SECURITY_LANDLOCK=y and "landlock" in the kernel's lsm= list), or, if running commands unconfined is acceptable, switch the profile's executor to bash-local.` +
		` (landlock probe: forced by the test)`
	var ue *bashsandbox.UnavailableError
	if err == nil || err.Error() != want || !errors.As(err, &ue) || ue.Mode != "workspace-write" {
		restore()
		t.Fatalf("CheckBackend error:\n got %v\nwant %s", err, want)
	}
	if err := bashsandbox.CheckBackend(shell.ModeDangerFullAccess); err != nil {
		restore()
		t.Fatalf("danger-full-access needs no backend: %v", err)
	}
	restore()
	if !bashsandbox.Probe().Usable {
		t.Fatal("restore did not bring the real probe back")
	}
	if got := (&bashsandbox.UnavailableError{Mode: "read-only"}).Error(); got != `sandbox mode "read-only" is requested but no sandbox backend is usable on this host; refusing to run the command unconfined. `+bashsandbox.Remedy {
		t.Fatalf("without a reason: %q", got)
	}
}

// TestNotDispatchedLaunchesNothing: a binary whose main does not dispatch the launcher
// must not be re-executed as one (it would run its ordinary main — a test binary its
// tests, recursively); both the argv builder and the probe refuse, and fail closed.
func TestNotDispatchedLaunchesNothing(t *testing.T) {
	noProcessLeft(t)
	restore := bashsandbox.SetDispatched(false)
	defer restore()
	const want = "bash-sandbox: this binary does not dispatch the sandbox launcher: its main (or TestMain) must call bashsandbox.MaybeRunLauncher first"
	_, err := bashsandbox.LauncherArgv(bashsandbox.LaunchPolicy{Mode: shell.ModeReadOnly, Network: bashsandbox.NetworkDeny}, []string{"true"})
	if err == nil || err.Error() != want {
		t.Fatalf("LauncherArgv: err = %v", err)
	}
	if r := bashsandbox.Probe(); r.Usable || r.Reason != want {
		t.Fatalf("Probe: %+v", r)
	}
	if len(children()) != 0 {
		t.Fatal("the probe started a process")
	}
	var ue *bashsandbox.UnavailableError
	if err := bashsandbox.CheckBackend(shell.ModeReadOnly); !errors.As(err, &ue) {
		t.Fatalf("CheckBackend: %v", err)
	}
}
