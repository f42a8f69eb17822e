package mcpserve

import (
	"runtime"
	"testing"
)

func TestProcs(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 1, 4: 1, 7: 1, 8: 2, 64: 16} {
		if got := procs(n); got != want {
			t.Errorf("procs(%d) = %d, want %d", n, got, want)
		}
	}
}

// ApplyProcs changes GOMAXPROCS only when FewerProcs is on and the environment leaves
// GOMAXPROCS to the program.
func TestApplyProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	Tuning{}.ApplyProcs()
	if got := runtime.GOMAXPROCS(0); got != 8 {
		t.Errorf("zero Tuning: GOMAXPROCS %d, want 8 (unchanged)", got)
	}
	t.Setenv("GOMAXPROCS", "8")
	DefaultTuning().ApplyProcs()
	if got := runtime.GOMAXPROCS(0); got != 8 {
		t.Errorf("GOMAXPROCS set in the environment: %d, want 8 (unchanged)", got)
	}
	t.Setenv("GOMAXPROCS", "")
	DefaultTuning().ApplyProcs()
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Errorf("FewerProcs: GOMAXPROCS %d, want 2", got)
	}
}
