package cli

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/mcpserve"
)

// Run leaves GOMAXPROCS to whoever owns the process, whatever tuning it is given.
func TestRunLeavesGOMAXPROCS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	t.Setenv("GOMAXPROCS", "")
	var stdout, stderr bytes.Buffer
	code := run([]string{"tools", "--profile", "minimal"}, strings.NewReader(""), &stdout, &stderr, Options{Tuning: mcpserve.DefaultTuning()})
	if code != exitOK || !strings.Contains(stdout.String(), `"name": "bash"`) {
		t.Fatalf("dsh tools: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if got := runtime.GOMAXPROCS(0); got != 8 {
		t.Errorf("GOMAXPROCS %d after Run, want 8 (unchanged)", got)
	}
}
