package subprocess

import (
	"os"
	"syscall"

	"github.com/dsh-dev/dsh/proc"
)

// startWith starts the leader through st (Spec.Start), in cgroup cgfd (-1 for none)
// and the cgroup v1 directories of bc (nil for none), under a terminal of size term
// (nil for none) that the Starter allocates.
func startWith(st proc.Starter, prog string, argv []string, attr *syscall.ProcAttr, files [3]*os.File, cgfd int, term *proc.Terminal, bc *budgetCgroups) (proc.Started, error) {
	req := proc.StartRequest{
		Path:     prog,
		Argv:     argv,
		Dir:      attr.Dir,
		Env:      attr.Env,
		Files:    files,
		CgroupFD: cgfd,
		Terminal: term,
	}
	if bc != nil && len(bc.tasks) > 0 {
		tasks, homes := bc.tasks, bc.homes
		req.CgroupV1 = tasks
		req.JoinCgroupV1 = func() (func(), error) { return joinCgroups(tasks, homes) }
	}
	return st.Start(req)
}

// abandonStarted ends a leader started for a tree the Supervisor cannot take (its
// Starter handed over no terminal): SIGKILL to its group, then, once it exited, its
// reaping — in the background, as nothing waits for it.
func abandonStarted(st proc.Started) {
	_ = syscall.Kill(-st.Pid(), syscall.SIGKILL)
	go func() {
		if _, err := st.Wait(); err == nil {
			st.Release()
		}
	}()
}
