package bashsandbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
	"github.com/dsh-dev/dsh/shell"
)

// Validation (and so `dsh check`) refuses the writableRoots that would fail the row at
// start or every confined call, naming the key.
func TestWritableRootsValidated(t *testing.T) {
	tmp, err := filepath.EvalSymlinks(os.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fine := t.TempDir()
	for _, c := range []struct {
		roots []string
		want  string
	}{
		{[]string{fine, "/nonexistent"}, "writableRoots[1]: lstat /nonexistent: no such file or directory"},
		{[]string{fine, tmp}, `the temp dir "` + tmp + `" holds the writable root "` + tmp + `" (writableRoots[1]), so it cannot be hidden from confined commands; refusing to run confined commands (keep it out of the workspace and writableRoots, or move it: subprocess spillRoot, TMPDIR)`},
		{[]string{fine}, ""},
	} {
		cfg := bashsandbox.DefaultConfig()
		cfg.WritableRoots = c.roots
		err := cfg.Validate()
		if (c.want == "") != (err == nil) || (err != nil && err.Error() != c.want) {
			t.Errorf("writableRoots %q: %v, want %q", c.roots, err, c.want)
		}
	}
}

// A writable root that shows confined commands what the box must hide is named by its
// key in the error every call gets, and CheckConfinement (dsh status) reports that error
// without running anything.
func TestExposingWritableRootNamed(t *testing.T) {
	spill := outsideTempDir(t, "dsh-sandbox-spill-")
	st := newStack(t, stackSetup{
		bashConfig: map[string]any{"defaultMode": shell.ModeWorkspaceWrite, "writableRoots": []any{spill}},
		subprocess: map[string]any{"spillRoot": spill},
	})
	ws := workspace(t)
	want := `bash-sandbox: the spill root "` + spill + `" holds the writable root "` + spill + `" (writableRoots[0]), so it cannot be hidden from confined commands; refusing to run confined commands (keep it out of the workspace and writableRoots, or move it: subprocess spillRoot, TMPDIR)`
	expect(t, st.bash(t, session("exposed", ws), "true"), "Error: "+want, true)

	policy, ok := policyOf(t, st).(interface{ CheckConfinement(string) error })
	if !ok {
		t.Fatal("the sandboxPolicy service has no CheckConfinement")
	}
	if err := policy.CheckConfinement(ws); err == nil || err.Error() != want {
		t.Errorf("CheckConfinement(%s) = %v, want %q", ws, err, want)
	}
	// A workspace that shows the spill root and the temp dir (/tmp) is the workspace's
	// fault: no key is named.
	good := newStack(t, stackSetup{bashConfig: map[string]any{"defaultMode": shell.ModeWorkspaceWrite}})
	check := policyOf(t, good).(interface{ CheckConfinement(string) error })
	if err := check.CheckConfinement(ws); err != nil {
		t.Errorf("CheckConfinement of a fine workspace: %v", err)
	}
	tmp, _ := filepath.EvalSymlinks(os.TempDir())
	if err := check.CheckConfinement(tmp); err == nil || !strings.Contains(err.Error(), `"`+tmp+`" holds the writable root "`+tmp+`", so`) {
		t.Errorf("CheckConfinement(%s) = %v", tmp, err)
	}
}

// policyOf is the stack's sandboxPolicy service.
func policyOf(t *testing.T, st *stack) shell.PolicyResolver {
	t.Helper()
	p, ok := container.Lookup(st.rt, shell.PolicyService)
	if !ok {
		t.Fatal("no sandboxPolicy service")
	}
	return p
}
