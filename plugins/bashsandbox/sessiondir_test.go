package bashsandbox_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
)

// The session directories of a dsh process that died are removed; a live process's,
// and directories of another form, are kept.
func TestStaleBasesAreRemoved(t *testing.T) {
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	dead := filepath.Join(root, fmt.Sprintf("dsh-sandbox-%d-ab", gone.Process.Pid))
	live := filepath.Join(root, fmt.Sprintf("dsh-sandbox-%d-cd", os.Getppid()))
	other := filepath.Join(root, "dsh-sandbox-probe-123")
	for _, d := range []string{dead, live, other} {
		if err := os.MkdirAll(filepath.Join(d, "s1", "tmp"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	bashsandbox.RemoveStaleBases(root)
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("a dead process's session directories kept: %v", err)
	}
	for _, d := range []string{live, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s removed: %v", d, err)
		}
	}
}
