package bashsandbox_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsh-dev/dsh/internal/proctest"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
)

// TestMain dispatches the sandbox first, exactly as dsh's main does: the tests start
// boxes by re-executing this test binary with the hidden argument.
//
// The commands the stack tests run inherit this process's environment: their messages
// must be the English ones the denial classifier and the exact assertions read.
func TestMain(m *testing.M) {
	bashsandbox.MaybeRunLauncher()
	os.Setenv("LC_ALL", "C")
	code := m.Run()
	helperOnce.Do(func() {}) // no helper built after this point
	if helperDir != "" {
		os.RemoveAll(helperDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !proctest.Until(10*time.Second, cond) {
		t.Fatalf("%s: not within 10s (children: %s)", what, proctest.Describe(proctest.Children()))
	}
}

// children lists the pids of this process's children, as /proc names them.
func children() []string {
	var out []string
	for _, pid := range proctest.Children() {
		out = append(out, strconv.Itoa(pid))
	}
	return out
}

// noProcessLeft fails the test if a child of this process outlives it.
func noProcessLeft(t *testing.T) {
	t.Cleanup(func() {
		waitFor(t, "no child process left behind", func() bool { return len(children()) == 0 })
	})
}

// The attack helper (testdata/attackhelper): a small static program a confined command
// runs to make the system calls bash cannot. It is built once per test binary, outside
// the temp dirs (the box masks the host's /tmp), or taken from
// $DSH_SANDBOX_HELPER (the unprivileged re-run gets the one its parent built).
var (
	helperOnce sync.Once
	helperPath string
	helperErr  error
)

// helper returns the path of the attack helper, building it on first use.
func helper(t testing.TB) string {
	t.Helper()
	helperOnce.Do(func() {
		if p := os.Getenv("DSH_SANDBOX_HELPER"); p != "" {
			helperPath = p
			return
		}
		base, err := os.UserCacheDir()
		if err == nil {
			err = os.MkdirAll(base, 0o755)
		}
		var dir string
		if err == nil {
			dir, err = os.MkdirTemp(base, "dsh-sandbox-helper-")
		}
		if err != nil {
			helperErr = err
			return
		}
		helperDir = dir
		helperPath, helperErr = buildHelper(dir)
	})
	if helperErr != nil {
		t.Skipf("no attack helper: %v", helperErr)
	}
	return helperPath
}

// helperDir is the directory the helper was built in (removed after the tests).
var helperDir string

// buildHelper builds the attack helper into dir (static, so it runs anywhere).
func buildHelper(dir string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go tool to build the attack helper: %v", err)
	}
	out := filepath.Join(dir, "attackhelper")
	cmd := exec.Command(goTool, "build", "-o", out, "./testdata/attackhelper")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the attack helper: %v\n%s", err, b)
	}
	os.Chmod(dir, 0o755)
	return out, nil
}
