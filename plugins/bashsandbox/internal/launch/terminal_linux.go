package launch

import (
	"strconv"
	"syscall"
	"unsafe"
)

// A command started with Start.Terminal runs under a terminal the box allocates from
// its own /dev/ptmx — in the namespaces, the box's own devpts instance (mounted with
// newinstance), so the command's terminal, the /dev/pts it sees and the /dev/tty it
// opens are the box's and nothing else's. The box opens the terminal from an
// unconfined thread (a command's thread is confined before it forks, and Landlock
// grants no device ioctls on what is opened after that), hands the slave to the command
// as its stdin, stdout, stderr and controlling terminal, and the master to dsh with the
// Started reply; it keeps neither.

// Terminal ioctls (asm-generic/ioctls.h).
const (
	tiocswinsz  = 0x5414
	tiocsptlck  = 0x40045431
	tiocgptn    = 0x80045430
	tiocgptpeer = 0x5441
)

// openTerminal allocates a terminal of cols × rows: its master, and the slave three
// times (distinct descriptors: each is closed once), all close-on-exec.
func openTerminal(cols, rows int) (master int, slave [3]int, err error) {
	slave = [3]int{-1, -1, -1}
	master, err = syscall.Open("/dev/ptmx", syscall.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, slave, errorf("open /dev/ptmx", err)
	}
	fail := func(what string, err error) (int, [3]int, error) {
		closeFDs(append([]int{master}, slave[:]...))
		return -1, [3]int{-1, -1, -1}, errorf(what, err)
	}
	unlock := int32(0)
	if err := ioctl(master, tiocsptlck, uintptr(unsafe.Pointer(&unlock))); err != nil {
		return fail("unlock the terminal", err)
	}
	ws := [4]uint16{uint16(rows), uint16(cols), 0, 0} // struct winsize: row, col, xpixel, ypixel
	if err := ioctl(master, tiocswinsz, uintptr(unsafe.Pointer(&ws))); err != nil {
		return fail("set the terminal's size", err)
	}
	if slave[0], err = openSlave(master); err != nil {
		return fail("open the terminal's slave", err)
	}
	for i := 1; i < 3; i++ {
		if slave[i], err = dupCloexec(slave[0]); err != nil {
			return fail("duplicate the terminal's slave", err)
		}
	}
	return master, slave, nil
}

// openSlave opens the slave of master: by TIOCGPTPEER (Linux 4.13), else by its name in
// the /dev/pts of this mount namespace.
func openSlave(master int) (int, error) {
	fd, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(master), tiocgptpeer, syscall.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC)
	if e == 0 {
		return int(fd), nil
	}
	var n uint32
	if err := ioctl(master, tiocgptn, uintptr(unsafe.Pointer(&n))); err != nil {
		return -1, err
	}
	return syscall.Open("/dev/pts/"+strconv.FormatUint(uint64(n), 10), syscall.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
}

func ioctl(fd int, req, arg uintptr) error {
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), req, arg); e != 0 {
		return e
	}
	return nil
}

func errorf(what string, err error) error { return &termError{what: what, err: err} }

type termError struct {
	what string
	err  error
}

func (e *termError) Error() string { return e.what + ": " + e.err.Error() }

// withTerminal readies start m under a terminal: its descriptors (the cgroup's, if any)
// get the slave in front as the command's stdio, and m holds the master until the
// Started reply carries it.
func (s *box) withTerminal(m *Start, fds []int) ([]int, error) {
	master, slave, err := openTerminal(m.Cols, m.Rows)
	if err != nil {
		return fds, err
	}
	m.master = master
	return append(slave[:], fds...), nil
}
