package subprocess

import (
	"syscall"
	"time"

	"github.com/dsh-dev/dsh/proc"
)

// startWith starts the leader through l's Starter (Spec.Start), in cgroup cgfd (-1
// for none) and the cgroup v1 directories of l.bud (nil for none), under a terminal of
// size l.term (nil for none) that the Starter allocates; the Starter bounds its own
// waits by l's deadline and abort, plus grace.
func startWith(l *launch, cgfd int, grace time.Duration) (proc.Started, error) {
	req := proc.StartRequest{
		Path:     l.prog,
		Argv:     l.argv,
		Dir:      l.attr.Dir,
		Env:      l.attr.Env,
		Files:    l.child,
		CgroupFD: cgfd,
		Terminal: l.term,
		Deadline: l.deadline,
		Abort:    l.abort,
		Grace:    grace,
	}
	if bc := l.bud; bc != nil && len(bc.tasks) > 0 {
		tasks, homes := bc.tasks, bc.homes
		req.CgroupV1 = tasks
		req.JoinCgroupV1 = func() (func(), error) { return joinCgroups(tasks, homes) }
	}
	return l.starter.Start(req)
}

// abandonStarted ends a leader started for a tree the Supervisor cannot take (its
// Starter handed over no terminal): SIGKILL to its group, then, once it exited, its
// reaping — in the background, as nothing waits for it.
func abandonStarted(st proc.Started) {
	if st.Pid() > 1 {
		_ = syscall.Kill(-st.Pid(), syscall.SIGKILL)
	}
	go func() {
		if _, err := st.Wait(); err == nil {
			st.Release()
		}
	}()
}
