package bashsandbox_test

import (
	"testing"

	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/shell"
	"github.com/dsh-dev/dsh/shell/bashexec"
	"github.com/dsh-dev/dsh/shell/shelltest"
)

// bash-sandbox honours the executor seam's contract: confined in workspace-write — in
// its box with namespaces, and with Landlock only — the model sees what
// bash-local would show it (background jobs, timeouts, tree kill, output bounds, the
// renderings).
func TestConformance(t *testing.T) {
	for _, namespaces := range []string{bashsandbox.NamespacesAuto, bashsandbox.NamespacesOff} {
		t.Run("namespaces "+namespaces, func(t *testing.T) { conformance(t, namespaces) })
	}
}

func conformance(t *testing.T, namespaces string) {
	shelltest.Run(t, shelltest.Target{
		Name: "bash-sandbox",
		New: func(t *testing.T, cfg bashexec.Config) (shell.Executor, shell.PolicyResolver) {
			sup := subprocess.New(subprocess.Options{SpillRoot: t.TempDir(), Logger: quietLogger()})
			t.Cleanup(sup.Close)
			c := bashsandbox.DefaultConfig()
			c.Config, c.DefaultMode, c.Namespaces = cfg, shell.ModeWorkspaceWrite, namespaces
			ex, resolver, err := bashsandbox.New(sup, c, quietLogger(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return ex, resolver
		},
	})
}
