package bashsandbox_test

import (
	"testing"

	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/plugins/toolbash/toolbashtest"
	"github.com/dsh-dev/dsh/shell"
	"github.com/dsh-dev/dsh/shell/bashexec"
	"github.com/dsh-dev/dsh/shell/shelltest"
)

// bash-sandbox honours the executor seam's contract: confined in workspace-write — in
// its box with namespaces, and with Landlock only — the model sees what bash-local
// would show it (timeouts, tree kill, output bounds, and through the bash tool the
// renderings and background jobs).
func TestConformance(t *testing.T) {
	for _, namespaces := range []string{bashsandbox.NamespacesAuto, bashsandbox.NamespacesOff} {
		t.Run("namespaces "+namespaces, func(t *testing.T) {
			target := shelltest.Target{
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
			}
			shelltest.Run(t, target)
			toolbashtest.Run(t, target)
		})
	}
}
