package subprocess

import (
	"math"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeInheritedFDs marks every descriptor above stderr close-on-exec, so that none
// reaches a command: children get exactly stdin, stdout and stderr. Everything Go opens
// is close-on-exec already; what is not is what the harness inherited from whoever
// started it (`exec 7>>file; dsh …`) or what cgo code opened. New runs it, before the
// Supervisor spawns anything: the Supervisor is the only spawner of commands, and
// syscall.ForkExec offers no hook between fork and exec where the child could close
// them itself. Descriptors handed to a child on purpose (os/exec's ExtraFiles) are
// unaffected: the child's copies are made by dup2, which clears the flag.
func closeInheritedFDs() {
	if unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	// Linux < 5.11: one fcntl per open descriptor.
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		return
	}
	defer dir.Close()
	names, _ := dir.Readdirnames(-1)
	for _, name := range names {
		if fd, err := strconv.Atoi(name); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}
