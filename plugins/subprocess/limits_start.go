package subprocess

import (
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/proc"
)

// A leader starts in its cgroup v1 directories the way it starts in its cgroup v2 one
// with clone3(CLONE_INTO_CGROUP), before it runs anything: the thread that forks it
// joins them first (writing "0" to a tasks file moves the writing thread alone, without
// the lock a move of a whole process takes), the fork inherits the thread's cgroups,
// and the thread goes back to the harness's own. A box, which forks its commands from a
// thread of its own, has that thread join them (proc.StartRequest.CgroupV1).

// joinCgroups moves the calling thread into the cgroups whose tasks files are tasks,
// locked to its goroutine, and returns the function that moves it back to homes (the
// harness's own cgroups, in the same order). A thread that cannot go back stays locked:
// it ends with its goroutine, and nothing else of the harness runs in those cgroups.
func joinCgroups(tasks, homes []*os.File) (leave func(), err error) {
	runtime.LockOSThread()
	back := func(n int) {
		ok := true
		for _, f := range homes[:n] {
			ok = writeZero(f) == nil && ok
		}
		if ok {
			runtime.UnlockOSThread()
		}
	}
	for i, f := range tasks {
		if err := writeZero(f); err != nil {
			back(i)
			return nil, &opError{op: "join", path: filepath.Dir(f.Name()), err: err}
		}
	}
	return func() { back(len(tasks)) }, nil
}

// writeZero writes "0" to a tasks file: through the File itself, as Fd would first
// ask the kernel whether the descriptor is non-blocking (a syscall per write).
func writeZero(f *os.File) error {
	_, err := f.Write(zero)
	return err
}

var zero = []byte("0")

// forkExecIn is forkExec from a thread in the cgroup v1 directories of bc (none: nil).
func forkExecIn(bc *budgetCgroups, prog string, argv []string, attr *syscall.ProcAttr) (int, error) {
	if bc == nil || len(bc.tasks) == 0 {
		return forkExec(prog, argv, attr)
	}
	leave, err := joinCgroups(bc.tasks, bc.homes)
	if err != nil {
		return 0, err
	}
	defer leave()
	return forkExec(prog, argv, attr)
}

// oomFirst makes the OOM killer choose pid, a command's leader (and what it starts,
// which inherits it), before anything of the harness: under a memory limit around the
// harness, a command's allocation ends a command, never the harness. The harness's own
// score is never lowered.
func oomFirst(pid int) {
	_ = writeSmallFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", "1000")
}

// killDeadV1Instances kills and removes what dead harnesses left in the cgroup v1
// directory own: their instance directories (dsh-<pid>-<random>) whose lock nobody
// holds and whose pid is gone. Without cgroup.kill in v1, every process listed is
// killed until none is left (a few rounds: a fork racing the kill).
func killDeadV1Instances(own string, log *slog.Logger) {
	fd, err := unix.Open(own, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	killed := 0
	proc.RemoveDeadInstances(fd, "dsh-", func(name string) {
		dir := filepath.Join(own, name)
		for i := 0; i < 100 && v1Populated(dir); i++ {
			if i == 0 {
				killed++
			}
			signalCgroupProcs(dir, syscall.SIGKILL)
			time.Sleep(10 * time.Millisecond) // start-up only
		}
		if err := removeCgroupDir(dir); err != nil {
			log.Warn("subprocess: cannot remove the cgroup of a dead harness", "err", err)
		}
	})
	if killed > 0 {
		log.Warn("subprocess: killed the commands that dead dsh instances left running", "cgroups", killed, "hierarchy", own)
	}
}
