package bashexec

import (
	"context"
	"errors"

	"github.com/dsh-dev/dsh/plugins/subprocess"
)

// Local returns the Spawner that runs commands on this host through sup, which owns
// them. A program name without a slash (the core's "bash") is looked up in the
// harness's PATH at each spawn and keeps its name as argv[0], so bash names itself
// "bash" in its messages, as it does under every executor; a missing program fails the
// call as a *proc.SpawnError.
func Local(sup *subprocess.Supervisor) Spawner { return local{sup} }

type local struct{ sup *subprocess.Supervisor }

func (l local) Spawn(ctx context.Context, cmd Command, lim Limits) (Process, error) {
	if l.sup == nil {
		return nil, errors.New("no subprocess supervisor")
	}
	p, err := l.sup.Spawn(ctx, subprocess.Spec{
		Argv:     cmd.Argv,
		Dir:      cmd.Dir,
		Env:      cmd.Env,
		DshEnv:   cmd.DshEnv,
		Stdin:    cmd.Stdin,
		Owner:    cmd.Owner,
		Stdout:   lim.Stdout,
		Stderr:   lim.Stderr,
		GraceMs:  lim.GraceMs,
		Deadline: lim.Deadline,
		Start:    cmd.Start,
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}
