package shelltest_test

import (
	"testing"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/kits/kittest"
	"github.com/dsh-dev/dsh/shell/shelltest"
)

func TestMain(m *testing.M) { proctest.Main(m) }

func TestKitPassesTheLocalCore(t *testing.T) {
	shelltest.Run(t, shelltest.Target{Name: kittest.Name, New: kittest.Local})
}

// breakers each break one rule; the kit must fail each in the subtest that checks it.
var breakers = map[string]kittest.Breaker{
	"drops-spawn-errors": {Subtest: "SpawnFailure", Wrap: kittest.DropsSpawnErrors},
	"rereads":            {Subtest: "ConsumingReads", Wrap: kittest.Rereads},
	"kill-is-abort":      {Subtest: "AbortAndKill", Wrap: kittest.KillIsAbort},
	"runs-under-timeout": {Subtest: "TermOnce", Spec: kittest.UnderTimeout},
}

// TestBrokenExecutor runs the kit against one broken executor; it is meant to fail, and
// runs only inside TestKitFailsBrokenExecutors.
func TestBrokenExecutor(t *testing.T) {
	shelltest.Run(t, shelltest.Target{Name: kittest.Name, New: kittest.Chosen(t, breakers).New})
}

func TestKitFailsBrokenExecutors(t *testing.T) { kittest.FailsEach(t, breakers) }
