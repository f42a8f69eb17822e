package bashsandbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	bashsandbox "github.com/dsh-dev/dsh/plugins/bash-sandbox"
)

// TestMain dispatches the launcher first, exactly as dsh's main does: the tests
// re-execute this test binary with the hidden argument.
//
// The commands the stack tests run inherit this process's environment: their messages
// must be the English ones the denial classifier and the exact assertions read.
func TestMain(m *testing.M) {
	bashsandbox.MaybeRunLauncher()
	os.Setenv("LC_ALL", "C")
	goleak.VerifyTestMain(m)
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// children lists the pids of this process's live children.
func children() []string {
	var out []string
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err == nil {
			out = append(out, strings.Fields(string(b))...)
		}
	}
	return out
}

// noProcessLeft fails the test if a child of this process outlives it.
func noProcessLeft(t *testing.T) {
	t.Cleanup(func() {
		waitFor(t, "no child process left behind", func() bool { return len(children()) == 0 })
	})
}
