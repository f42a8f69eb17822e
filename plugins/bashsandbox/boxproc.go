package bashsandbox

import (
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/dsh-dev/dsh/plugins/bashsandbox/internal/launch"
	"github.com/dsh-dev/dsh/proc"
)

// boxStarter starts the box itself (a proc.Starter): the
// dsh binary as this process's direct child, with the control socket as its fd 3, in
// new user, mount, PID, IPC and UTS namespaces (and a network namespace when the
// network is denied) unless the backend is Landlock-only.
//
// The user namespace maps each id to itself: the box and its commands run as the
// harness's own user, so files keep their owners and nothing runs as a different
// user. As root every id is mapped; otherwise only the harness's own uid and gid can be
// (the kernel allows nothing more without privilege), and the box keeps the
// capabilities it needs to build its mounts (CAP_SYS_ADMIN), bring up its loopback
// (CAP_NET_ADMIN), empty its commands' bounding sets (CAP_SETPCAP) and forbid nested
// user namespaces (CAP_SYS_RESOURCE) as ambient capabilities across the exec — inside
// its own user namespace only. Commands drop every capability before they run.
type boxStarter struct {
	namespaces bool
	network    string
	ctl        *os.File
}

// Capabilities (linux/capability.h).
const (
	capSetpcap     = 8
	capNetAdmin    = 12
	capSysAdmin    = 21
	capSysResource = 24
)

func (st *boxStarter) Start(req proc.StartRequest) (proc.Started, error) {
	pidfd := -1
	sys := &syscall.SysProcAttr{Setsid: true, PidFD: &pidfd}
	if st.namespaces {
		sys.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
		if st.network == NetworkDeny {
			sys.Cloneflags |= syscall.CLONE_NEWNET
		}
		uid, gid := os.Getuid(), os.Getgid()
		if uid == 0 {
			sys.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1<<32 - 1}}
			sys.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1<<32 - 1}}
			sys.GidMappingsEnableSetgroups = true
		} else {
			sys.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
			sys.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
			sys.AmbientCaps = []uintptr{capSetpcap, capNetAdmin, capSysAdmin, capSysResource}
		}
	}
	if req.CgroupFD >= 0 {
		sys.UseCgroupFD, sys.CgroupFD = true, req.CgroupFD
	}
	attr := &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{},
		Files: []uintptr{req.Files[0].Fd(), req.Files[1].Fd(), req.Files[2].Fd(), st.ctl.Fd()},
		Sys:   sys,
	}
	if st.namespaces && os.Getuid() != 0 {
		// This process is not dumpable (see MaybeRunLauncher), and neither is a child
		// until it execs: its /proc files belong to root, and an unprivileged parent
		// could not write its uid_map and gid_map. Dumpable for the fork only; the
		// box makes itself non-dumpable again first thing.
		dumpable.Lock()
		defer dumpable.Unlock()
		_ = launch.SetDumpable(true)
		defer launch.SetDumpable(false)
	}
	if req.JoinCgroupV1 != nil {
		// The box is forked here, on this thread: in the session's cgroup v1
		// directories, as its commands are.
		leave, err := req.JoinCgroupV1()
		if err != nil {
			return nil, err
		}
		defer leave()
	}
	pid, err := syscall.ForkExec(req.Path, req.Argv, attr)
	if err != nil {
		return nil, err
	}
	return &child{pid: pid, pidfd: pidfd}, nil
}

// dumpable serialises the forks that need this process dumpable for a moment.
var dumpable sync.Mutex

// child is a direct child of this process (a proc.Started).
type child struct {
	pid   int
	pidfd int
}

func (c *child) Pid() int { return c.pid }

// Wait waits for the exit without reaping (launch.AwaitExit).
func (c *child) Wait() (proc.Exit, error) {
	var pidfd *os.File
	if c.pidfd >= 0 && syscall.SetNonblock(c.pidfd, true) == nil {
		pidfd = os.NewFile(uintptr(c.pidfd), "pidfd")
		c.pidfd = -1
		defer pidfd.Close()
	}
	code, sig, err := launch.AwaitExit(c.pid, pidfd)
	if err != nil {
		return proc.Exit{}, fmt.Errorf("wait for the session sandbox: %w", err)
	}
	return proc.WaitExit(code, syscall.Signal(sig)), nil
}

// Release reaps the child.
func (c *child) Release() { launch.Reap(c.pid) }
