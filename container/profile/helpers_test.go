package profile_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/dsh-dev/dsh/container/internal/containertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The shared test plugins and assertions (package containertest), by short names.
type (
	journal    = containertest.Journal
	testConfig = containertest.Config
)

var (
	quiet           = containertest.Quiet
	waitFor         = containertest.WaitFor
	keys            = containertest.Keys
	plug            = containertest.Plug
	exclusive       = containertest.Exclusive
	newRuntime      = containertest.NewRuntime
	states          = containertest.States
	rowStatus       = containertest.RowStatus
	wantState       = containertest.WantState
	wantEntries     = containertest.WantEntries
	mustNil         = containertest.MustNil
	wantErrContains = containertest.WantErrContains
)
