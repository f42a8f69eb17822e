package toolbashtest_test

import (
	"testing"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/kits/kittest"
	"github.com/dsh-dev/dsh/plugins/toolbash/toolbashtest"
)

func TestMain(m *testing.M) { proctest.Main(m) }

func TestKitPassesTheLocalCore(t *testing.T) {
	toolbashtest.Run(t, toolbashtest.Target{Name: kittest.Name, New: kittest.Local})
}

// breakers each break one rule; the kit must fail each in the subtest that checks it.
var breakers = map[string]kittest.Breaker{
	"swaps-streams":      {Subtest: "Renderings", Wrap: kittest.SwapsStreams},
	"drops-spawn-errors": {Subtest: "Background", Wrap: kittest.DropsSpawnErrors},
	"rereads":            {Subtest: "Background", Wrap: kittest.Rereads},
}

// TestBrokenExecutor runs the kit against one broken executor; it is meant to fail, and
// runs only inside TestKitFailsBrokenExecutors.
func TestBrokenExecutor(t *testing.T) {
	toolbashtest.Run(t, toolbashtest.Target{Name: kittest.Name, New: kittest.Chosen(t, breakers).New})
}

func TestKitFailsBrokenExecutors(t *testing.T) { kittest.FailsEach(t, breakers) }
