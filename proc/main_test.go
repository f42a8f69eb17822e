package proc_test

import (
	"testing"

	"github.com/dsh-dev/dsh/internal/proctest"
)

func TestMain(m *testing.M) { proctest.Main(m) }
