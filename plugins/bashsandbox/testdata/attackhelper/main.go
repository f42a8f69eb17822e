// Command attackhelper is the bash-sandbox tests' attack helper: run inside a confined
// command, it makes one system call an attacker would and prints "ok" or the error.
// The tests build it (static) before their first attack.
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() { os.Exit(helperMain(os.Args[1:])) }

// helperMain runs one attack and prints "ok" or the error; it exits 0 either way (the
// output is the verdict), 2 for a usage error.
func helperMain(args []string) int {
	if len(args) == 0 {
		fmt.Println("usage")
		return 2
	}
	err := attack(args[0], args[1:])
	if err == nil {
		fmt.Println("ok")
	} else {
		fmt.Println(errText(err))
	}
	return 0
}

func errText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}

func attack(op string, args []string) error {
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	switch op {
	case "socket": // family type [protocol]
		fam, _ := strconv.Atoi(arg(0))
		typ, _ := strconv.Atoi(arg(1))
		proto, _ := strconv.Atoi(arg(2))
		fd, err := syscall.Socket(fam, typ, proto)
		if err == nil {
			syscall.Close(fd)
		}
		return err
	case "socketpair":
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
		if err == nil {
			syscall.Close(fds[0])
			syscall.Close(fds[1])
		}
		return err
	case "connect-unix": // path or @abstract
		c, err := net.Dial("unix", arg(0))
		if err == nil {
			c.Write([]byte("hello from the sandbox\n"))
			c.Close()
		}
		return unwrap(err)
	case "udp": // host:port
		c, err := net.Dial("udp", arg(0))
		if err != nil {
			return unwrap(err)
		}
		defer c.Close()
		_, err = c.Write([]byte("udp from the sandbox"))
		return unwrap(err)
	case "sethostname":
		return syscall.Sethostname([]byte("dsh-sandbox-attack"))
	case "lo-down": // what `ip link set lo down` asks the kernel
		s, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
		if err != nil {
			s, err = syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW, 0)
			if err != nil {
				return err
			}
		}
		defer syscall.Close(s)
		var ifr [40]byte
		copy(ifr[:], "lo")
		_, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(s), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&ifr[0])))
		if e != 0 {
			return e
		}
		return nil
	case "mknod-block": // path
		return syscall.Mknod(arg(0), syscall.S_IFBLK|0o600, 0x0800) // 8:0, a disk
	case "read": // path
		_, err := os.ReadFile(arg(0))
		return unwrap(err)
	case "write": // path
		return unwrap(os.WriteFile(arg(0), []byte("written from the sandbox\n"), 0o644))
	case "unlink": // path
		return syscall.Unlink(arg(0))
	case "rmdir": // path
		return syscall.Rmdir(arg(0))
	case "rename": // path to
		return syscall.Rename(arg(0), arg(1))
	case "kill": // pid
		pid, _ := strconv.Atoi(arg(0))
		return syscall.Kill(pid, syscall.SIGTERM)
	case "ptrace": // pid
		pid, _ := strconv.Atoi(arg(0))
		err := syscall.PtraceAttach(pid)
		if err == nil {
			syscall.PtraceDetach(pid)
		}
		return err
	case "userns": // a child in a new user namespace (unshare(2) needs one thread)
		pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}})
		if err == nil {
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, 0, nil)
		}
		return err
	case "chmod": // path: to the mode it has (nothing changes if it gets through)
		var st syscall.Stat_t
		if err := syscall.Stat(arg(0), &st); err != nil {
			return err
		}
		return syscall.Chmod(arg(0), st.Mode&0o7777)
	case "chown": // path: to the owner it has (-1, -1)
		return syscall.Chown(arg(0), -1, -1)
	case "utimes": // path: to the times it has
		var st syscall.Stat_t
		if err := syscall.Stat(arg(0), &st); err != nil {
			return err
		}
		return syscall.UtimesNano(arg(0), []syscall.Timespec{st.Atim, st.Mtim})
	case "keyring": // description: read that user key from the session keyring
		if _, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false); err != nil {
			return err
		}
		id, err := unix.KeyctlSearch(unix.KEY_SPEC_SESSION_KEYRING, "user", arg(0), 0)
		if err != nil {
			return err
		}
		buf := make([]byte, 256)
		n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
		if err != nil {
			return err
		}
		return fmt.Errorf("read the key: %q", buf[:min(n, len(buf))])
	case "add-key": // description: add a user key to the session keyring
		_, err := unix.AddKey("user", arg(0), []byte("from the sandbox"), unix.KEY_SPEC_SESSION_KEYRING)
		return err
	case "fds": // the descriptors this process was started with
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			return err
		}
		var fds []string
		for _, e := range entries {
			// Not the directory being listed, nor what the Go runtime opens at start
			// (its poller; the cgroup CPU limits it follows).
			if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && !strings.HasPrefix(target, "/proc/") &&
				!strings.HasPrefix(target, "anon_inode:") && !strings.HasPrefix(target, "/sys/fs/cgroup/") {
				fds = append(fds, e.Name())
			}
		}
		return errors.New("fds " + strings.Join(fds, " "))
	}
	return errors.New("unknown attack " + op)
}

func unwrap(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}
