package subprocess

import (
	"os"
	"syscall"

	"github.com/dsh-dev/dsh/proc"
)

// startWith starts the leader through st (Spec.Start), in cgroup cgfd (-1 for none)
// and the cgroup v1 directories of bc (nil for none).
func startWith(st proc.Starter, prog string, argv []string, attr *syscall.ProcAttr, files [3]*os.File, cgfd int, bc *budgetCgroups) (proc.Started, error) {
	req := proc.StartRequest{
		Path:     prog,
		Argv:     argv,
		Dir:      attr.Dir,
		Env:      attr.Env,
		Files:    files,
		CgroupFD: cgfd,
	}
	if bc != nil && len(bc.tasks) > 0 {
		tasks, homes := bc.tasks, bc.homes
		req.CgroupV1 = tasks
		req.JoinCgroupV1 = func() (func(), error) { return joinCgroups(tasks, homes) }
	}
	return st.Start(req)
}
