package launch

import (
	"os"
	"strconv"
	"syscall"
)

func closeFDs(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

func dupCloexec(fd int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// closeRangeCloexec marks every descriptor from first on close-on-exec.
func closeRangeCloexec(first int) error {
	const sysCloseRange = 436        // the same number on every architecture
	const closeRangeCloexec = 1 << 2 // CLOSE_RANGE_CLOEXEC
	_, _, e := syscall.Syscall(sysCloseRange, uintptr(first), ^uintptr(0)>>32, closeRangeCloexec)
	if e == 0 {
		return nil
	}
	if e != syscall.ENOSYS && e != syscall.EINVAL {
		return e
	}
	// Before Linux 5.11: one by one.
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, d := range entries {
		if fd, err := strconv.Atoi(d.Name()); err == nil && fd >= first {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}
