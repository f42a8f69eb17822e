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

// attack runs the attack op with its arguments.
func attack(op string, args []string) error {
	run, ok := attacks[op]
	if !ok {
		return errors.New("unknown attack " + op)
	}
	return run(argv(args))
}

// argv are an attack's arguments; a missing one reads as "".
type argv []string

func (a argv) at(i int) string {
	if i < len(a) {
		return a[i]
	}
	return ""
}

func (a argv) int(i int) int {
	n, _ := strconv.Atoi(a.at(i))
	return n
}

// attacks by name, each with what its arguments are.
var attacks = map[string]func(a argv) error{
	// Sockets and the network.
	"socket":       socket,        // family type [protocol]
	"socketpair":   socketpair,    // [type]: AF_UNIX, SOCK_STREAM by default
	"dgram-pair":   dgramPair,     // path: a datagram socketpair's sendto to a pathname socket
	"dgram-unix":   dgramUnix,     // path: an AF_UNIX datagram socket's sendto to it
	"fastopen":     fastOpen,      // host:port: sendto(MSG_FASTOPEN) on an unconnected TCP socket
	"listen":       listenUnbound, // listen(2) on a TCP socket never bound (an autobind)
	"connect-unix": connectUnix,   // path or @abstract
	"udp":          udp,           // host:port
	"lo-down":      loDown,        // what `ip link set lo down` asks the kernel
	"sethostname":  sethostname,
	// Kernel state a command could inherit or create.
	"keyring": readKeyring, // description: read that user key from the session keyring
	"add-key": addKey,      // description: add a user key to the session keyring
	"fds":     openFDs,     // the descriptors this process was started with
	"userns":  newUserns,   // a child in a new user namespace
	// Cgroups.
	"clone3-cgroup": clone3Cgroup, // [linger]: clone3(CLONE_INTO_CGROUP) into the parent cgroup
	"cgroup-procs":  cgroupProcs,  // write this process's pid to the parent cgroup's cgroup.procs
	// Other processes.
	"kill":   kill,   // pid
	"ptrace": ptrace, // pid
	// Files.
	"mknod-block": mknodBlock, // path
	"read":        read,       // path
	"write":       write,      // path
	"unlink":      unlink,     // path
	"rmdir":       rmdir,      // path
	"rename":      rename,     // path to
	"chmod":       chmodSame,  // path: to the mode it has (nothing changes if it gets through)
	"chown":       chownSame,  // path: to the owner it has (-1, -1)
	"utimes":      utimesSame, // path: to the times it has
}

func socket(a argv) error {
	fd, err := syscall.Socket(a.int(0), a.int(1), a.int(2))
	if err == nil {
		syscall.Close(fd)
	}
	return err
}

func socketpair(a argv) error {
	typ := syscall.SOCK_STREAM
	if a.at(0) != "" {
		typ = a.int(0)
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, typ, 0)
	if err == nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
	}
	return err
}

// dgramPair sends a datagram to the pathname socket at path from a socket of a
// datagram pair (its peer is the other end, but sendto names another address).
func dgramPair(a argv) error {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	return syscall.Sendto(fds[0], []byte("datagram from the sandbox"), 0, &syscall.SockaddrUnix{Name: a.at(0)})
}

func dgramUnix(a argv) error {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	return syscall.Sendto(fd, []byte("datagram from the sandbox"), 0, &syscall.SockaddrUnix{Name: a.at(0)})
}

// fastOpen sends data with MSG_FASTOPEN to host:port from a TCP socket that was never
// connected: a TCP Fast Open send connects as it sends.
func fastOpen(a argv) error {
	addr, err := net.ResolveTCPAddr("tcp4", a.at(0))
	if err != nil {
		return err
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	sa := &syscall.SockaddrInet4{Port: addr.Port}
	copy(sa.Addr[:], addr.IP.To4())
	return syscall.Sendto(fd, []byte("fast open from the sandbox"), unix.MSG_FASTOPEN, sa)
}

// listenUnbound listens on a TCP socket that was never bound, which binds it to an
// ephemeral port of every address; it prints the port it got.
func listenUnbound(argv) error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	if err := syscall.Listen(fd, 1); err != nil {
		return err
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return err
	}
	return fmt.Errorf("listening on port %d", sa.(*syscall.SockaddrInet4).Port)
}

func connectUnix(a argv) error {
	c, err := net.Dial("unix", a.at(0))
	if err == nil {
		c.Write([]byte("hello from the sandbox\n"))
		c.Close()
	}
	return unwrap(err)
}

func udp(a argv) error {
	c, err := net.Dial("udp", a.at(0))
	if err != nil {
		return unwrap(err)
	}
	defer c.Close()
	_, err = c.Write([]byte("udp from the sandbox"))
	return unwrap(err)
}

func loDown(argv) error {
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
}

func sethostname(argv) error { return syscall.Sethostname([]byte("dsh-sandbox-attack")) }

func readKeyring(a argv) error {
	if _, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false); err != nil {
		return err
	}
	id, err := unix.KeyctlSearch(unix.KEY_SPEC_SESSION_KEYRING, "user", a.at(0), 0)
	if err != nil {
		return err
	}
	buf := make([]byte, 256)
	n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
	if err != nil {
		return err
	}
	return fmt.Errorf("read the key: %q", buf[:min(n, len(buf))])
}

func addKey(a argv) error {
	_, err := unix.AddKey("user", a.at(0), []byte("from the sandbox"), unix.KEY_SPEC_SESSION_KEYRING)
	return err
}

func openFDs(argv) error {
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

// newUserns starts a child in a new user namespace (unshare(2) needs one thread).
func newUserns(argv) error {
	pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}})
	if err == nil {
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, 0, nil)
	}
	return err
}

// parentCgroup is the cgroup v2 directory above this process's own.
func parentCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	rel := ""
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			rel = p
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if f := strings.Fields(pre); ok && len(f) > 4 && strings.HasPrefix(post, "cgroup2 ") {
			own := f[4] + rel
			if i := strings.LastIndexByte(own, '/'); i > len(f[4]) {
				return own[:i], nil
			}
			return f[4], nil
		}
	}
	return "", errors.New("no cgroup2 mount")
}

// cloneArgs is struct clone_args (CLONE_ARGS_SIZE_VER2).
type cloneArgs struct {
	flags, pidfd, childTID, parentTID, exitSignal, stack, stackSize, tls, setTID, setTIDSize, cgroup uint64
}

// clone3Cgroup starts a child in the parent cgroup with clone3(CLONE_INTO_CGROUP). The
// child sleeps (for linger: until killed; else 30 s) and never returns to Go code.
func clone3Cgroup(a argv) error {
	parent, err := parentCgroup()
	if err != nil {
		return err
	}
	dir, err := syscall.Open(parent, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(dir)
	args := &cloneArgs{flags: unix.CLONE_INTO_CGROUP, exitSignal: uint64(syscall.SIGCHLD), cgroup: uint64(dir)}
	rounds := uintptr(3)
	if a.at(0) == "linger" {
		rounds = ^uintptr(0)
	}
	ts := &syscall.Timespec{Sec: 10}
	pid, _, e := syscall.RawSyscall(unix.SYS_CLONE3, uintptr(unsafe.Pointer(args)), unsafe.Sizeof(*args), 0)
	if e != 0 {
		return e
	}
	if pid == 0 { // the child: raw system calls only
		for i := uintptr(0); i < rounds; i++ {
			syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(ts)), 0, 0)
		}
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
	}
	return fmt.Errorf("started pid %d in %s", pid, parent)
}

func cgroupProcs(argv) error {
	parent, err := parentCgroup()
	if err != nil {
		return err
	}
	return unwrap(os.WriteFile(parent+"/cgroup.procs", []byte(strconv.Itoa(os.Getpid())), 0o644))
}

func kill(a argv) error { return syscall.Kill(a.int(0), syscall.SIGTERM) }

func ptrace(a argv) error {
	pid := a.int(0)
	err := syscall.PtraceAttach(pid)
	if err == nil {
		syscall.PtraceDetach(pid)
	}
	return err
}

func mknodBlock(a argv) error {
	return syscall.Mknod(a.at(0), syscall.S_IFBLK|0o600, 0x0800) // 8:0, a disk
}

func read(a argv) error {
	_, err := os.ReadFile(a.at(0))
	return unwrap(err)
}

func write(a argv) error {
	return unwrap(os.WriteFile(a.at(0), []byte("written from the sandbox\n"), 0o644))
}

func unlink(a argv) error { return syscall.Unlink(a.at(0)) }

func rmdir(a argv) error { return syscall.Rmdir(a.at(0)) }

func rename(a argv) error { return syscall.Rename(a.at(0), a.at(1)) }

func chmodSame(a argv) error {
	var st syscall.Stat_t
	if err := syscall.Stat(a.at(0), &st); err != nil {
		return err
	}
	return syscall.Chmod(a.at(0), st.Mode&0o7777)
}

func chownSame(a argv) error { return syscall.Chown(a.at(0), -1, -1) }

func utimesSame(a argv) error {
	var st syscall.Stat_t
	if err := syscall.Stat(a.at(0), &st); err != nil {
		return err
	}
	return syscall.UtimesNano(a.at(0), []syscall.Timespec{st.Atim, st.Mtim})
}

func unwrap(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}
