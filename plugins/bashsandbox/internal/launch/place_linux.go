package launch

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// How a command gets into its cgroup. In the namespaces the box forks it there with
// clone3's CLONE_INTO_CGROUP, through the cgroup's descriptor dsh sends; its commands
// see no cgroup file system (the plan masks them all), so they have no cgroup to name.
// Without namespaces nothing can be masked: the seccomp filter refuses clone3 to
// commands, and so to the box, which forks them with clone(2), which cannot place a
// child in a cgroup. So the child is traced (PTRACE_TRACEME) and stops at its exec,
// before the command's first instruction; the box writes its pid into the cgroup's
// cgroup.procs, through a descriptor opened before the thread was confined, and lets it
// go (PTRACE_DETACH). Whatever the command starts is then in its cgroup from its first
// instruction on.
//
// Where ptrace is forbidden (Yama's ptrace_scope 3, another security module), that box
// places commands with clone3 instead and the filter allows clone3: commands could then
// leave their cgroup, and dsh reports it (HoldAtExec).

// HoldAtExec reports whether a box can hold a command at its exec (ptrace), which
// keeping commands in their cgroup needs. It is probed once per process, as the box
// would do it: a child of this process's, traced from its fork, must stop at its exec
// (Yama's ptrace_scope 3, or another security module, can forbid it). dsh probes and
// tells its boxes (Setup.Hold).
func HoldAtExec() bool { return holdAtExec() }

var holdAtExec = sync.OnceValue(func() bool {
	if b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); err == nil && len(b) > 0 && b[0] == '3' {
		return false
	}
	runtime.LockOSThread() // the tracer is this thread
	defer runtime.UnlockOSThread()
	devnull, err := syscall.Open("/dev/null", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer syscall.Close(devnull)
	fd := uintptr(devnull)
	// Never runs past its exec: killed there.
	pid, err := syscall.ForkExec("/proc/self/exe", []string{"dsh-sandbox", FailArg, "ptrace probe"},
		&syscall.ProcAttr{Files: []uintptr{fd, fd, fd}, Sys: &syscall.SysProcAttr{Ptrace: true}})
	if err != nil {
		return false
	}
	var info siginfo
	for waitid(pPID, uintptr(pid), &info, syscall.WSTOPPED|syscall.WEXITED|wNowait) == syscall.EINTR {
	}
	held := info.code == cldTrapped
	syscall.Kill(pid, syscall.SIGKILL)
	for waitid(pPID, uintptr(pid), &info, syscall.WEXITED) == syscall.EINTR {
	}
	return held
})

// cldTrapped is siginfo's si_code of a traced child's stop.
const cldTrapped = 4

// cgroupPlacement puts one forked command in its cgroup: procs is the cgroup's
// cgroup.procs, open for writing, when the command is held at its exec; -1 when
// clone3 placed it (or it has no cgroup).
type cgroupPlacement struct{ procs int }

// placement readies the placement of a command in the cgroup cgroupfd, on the attributes
// of its fork: traced to be held at its exec, or placed by clone3.
func (s *box) placement(cgroupfd int, sys *syscall.SysProcAttr) (cgroupPlacement, error) {
	if !s.hold {
		sys.UseCgroupFD, sys.CgroupFD = true, cgroupfd
		return cgroupPlacement{procs: -1}, nil
	}
	fd, err := syscall.Openat(cgroupfd, "cgroup.procs", syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return cgroupPlacement{procs: -1}, errors.New("open the command's cgroup.procs: " + err.Error())
	}
	sys.Ptrace = true
	return cgroupPlacement{procs: fd}, nil
}

// place moves the held child pid into the cgroup and lets it run; nothing to do
// without a held child.
func (c cgroupPlacement) place(pid int) error {
	if c.procs < 0 {
		return nil
	}
	var info siginfo
	for {
		e := waitid(pPID, uintptr(pid), &info, syscall.WSTOPPED|syscall.WEXITED|wNowait)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return errors.New("wait for the command's exec: " + e.Error())
		}
		break
	}
	if info.code != cldTrapped {
		return errors.New("the command ended before it could be put in its cgroup")
	}
	pidText := []byte(strconv.Itoa(pid))
	if _, err := syscall.Write(c.procs, pidText); err != nil {
		return errors.New("put the command in its cgroup: " + err.Error())
	}
	if err := syscall.PtraceDetach(pid); err != nil {
		return errors.New("let the command run: ptrace(PTRACE_DETACH): " + err.Error())
	}
	return nil
}

func (c cgroupPlacement) close() {
	if c.procs >= 0 {
		syscall.Close(c.procs)
	}
}

// discard kills and reaps a child that was forked but is not to run, and closes its
// pidfd.
func discard(pid, pidfd int) {
	syscall.Kill(pid, syscall.SIGKILL)
	var info siginfo
	for waitid(pPID, uintptr(pid), &info, syscall.WEXITED) == syscall.EINTR {
	}
	if pidfd >= 0 {
		syscall.Close(pidfd)
	}
}
