package subprocess

import (
	"os"
	"syscall"

	"github.com/dsh-dev/dsh/proc"
)

// startWith starts the leader through st (Spec.Start), in cgroup cgfd (-1 for none).
func startWith(st proc.Starter, prog string, argv []string, attr *syscall.ProcAttr, files [3]*os.File, cgfd int) (proc.Started, error) {
	return st.Start(proc.StartRequest{
		Path:     prog,
		Argv:     argv,
		Dir:      attr.Dir,
		Env:      attr.Env,
		Files:    files,
		CgroupFD: cgfd,
	})
}
