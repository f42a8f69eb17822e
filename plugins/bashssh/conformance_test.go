package bashssh_test

import (
	"testing"

	"github.com/dsh-dev/dsh/internal/sshtest"
	bashssh "github.com/dsh-dev/dsh/plugins/bashssh"
	"github.com/dsh-dev/dsh/plugins/toolbash/toolbashtest"
	"github.com/dsh-dev/dsh/shell"
	"github.com/dsh-dev/dsh/shell/bashexec"
	"github.com/dsh-dev/dsh/shell/shelltest"
)

// bash-ssh honours the executor seam's contract, and shows the model through the bash
// tool what the tool promises, against a real sshd on this machine (which is the remote
// host: the kits' directories and process checks are local).
func TestConformance(t *testing.T) {
	srv := sshtest.Start(t)
	target := shelltest.Target{
		Name: bashssh.Name,
		New: func(t *testing.T, cfg bashexec.Config) (shell.Executor, shell.PolicyResolver) {
			ex, err := bashssh.New(newHost(t, srv, nil), &bashssh.Config{Config: cfg})
			if err != nil {
				t.Fatal(err)
			}
			return ex, nil
		},
	}
	shelltest.Run(t, target)
	toolbashtest.Run(t, target)
}
