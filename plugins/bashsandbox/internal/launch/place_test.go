//go:build linux

package launch

import (
	"os"
	"strings"
	"testing"
)

// The probe of holding a command at its exec: a traced child stops at its exec here,
// unless Yama forbids every ptrace.
func TestHoldAtExec(t *testing.T) {
	b, _ := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	want := strings.TrimSpace(string(b)) != "3"
	if got := HoldAtExec(); got != want {
		t.Fatalf("HoldAtExec() = %v, want %v (Yama ptrace_scope %q; another security module may forbid ptrace here)", got, want, b)
	}
	if HoldAtExec() != want {
		t.Fatal("the probe changed its mind")
	}
}
