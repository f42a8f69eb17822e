package bashlocal_test

import (
	"testing"

	bashlocal "github.com/dsh-dev/dsh/plugins/bashlocal"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/plugins/toolbash/toolbashtest"
	"github.com/dsh-dev/dsh/shell"
	"github.com/dsh-dev/dsh/shell/bashexec"
	"github.com/dsh-dev/dsh/shell/shelltest"
)

// bash-local honours the executor seam's contract, and shows the model through the bash
// tool what the tool promises, in both isolation modes.
func TestConformance(t *testing.T) {
	for _, mode := range []string{subprocess.IsolationAuto, subprocess.IsolationProcessGroup} {
		t.Run(mode, func(t *testing.T) {
			target := shelltest.Target{
				Name: bashlocal.Name,
				New: func(t *testing.T, cfg bashexec.Config) (shell.Executor, shell.PolicyResolver) {
					sup := subprocess.New(subprocess.Options{SpillRoot: t.TempDir(), DisableCgroups: mode == subprocess.IsolationProcessGroup})
					t.Cleanup(sup.Close)
					ex, err := bashlocal.New(sup, &bashlocal.Config{Config: cfg})
					if err != nil {
						t.Fatal(err)
					}
					return ex, nil
				},
			}
			shelltest.Run(t, target)
			toolbashtest.Run(t, target)
		})
	}
}
