package subprocess

import (
	"context"
	"errors"

	"github.com/dsh-dev/dsh/shell/bashexec"
)

// Spawner returns the executor core's Spawner that runs commands on this host through
// s, which owns them. A program name without a slash (the core's "bash") is looked up
// in the harness's PATH at each spawn and keeps its name as argv[0], so bash names
// itself "bash" in its messages, as it does under every executor; a missing program
// fails the call as a *proc.SpawnError.
func (s *Supervisor) Spawner() bashexec.Spawner { return spawner{s} }

type spawner struct{ sup *Supervisor }

// Terminals reports that commands can run under a terminal (Command.Terminal).
func (l spawner) Terminals() bool { return true }

func (l spawner) Spawn(ctx context.Context, cmd bashexec.Command, lim bashexec.Limits) (bashexec.Process, error) {
	if l.sup == nil {
		return nil, errors.New("no subprocess supervisor")
	}
	p, err := l.sup.Spawn(ctx, Spec{
		Argv:      cmd.Argv,
		Dir:       cmd.Dir,
		Env:       cmd.Env,
		DshEnv:    cmd.DshEnv,
		Stdin:     cmd.Stdin,
		Owner:     cmd.Owner,
		Stdout:    lim.Stdout,
		Stderr:    lim.Stderr,
		GraceMs:   lim.GraceMs,
		Deadline:  lim.Deadline,
		Start:     cmd.Start,
		Resources: lim.Resources,
		Terminal:  cmd.Terminal,

		EndWithLeader: cmd.EndWithLeader,
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}
