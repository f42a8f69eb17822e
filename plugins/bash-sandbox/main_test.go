package bashsandbox_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"go.uber.org/goleak"

	bashsandbox "github.com/dsh-dev/dsh/plugins/bash-sandbox"
)

// TestMain dispatches the sandbox first, exactly as dsh's main does: the tests start
// session sandboxes by re-executing this test binary with the hidden argument. It also
// serves as the attack helper (see helperMain) when a confined command runs a copy of
// it.
//
// The commands the stack tests run inherit this process's environment: their messages
// must be the English ones the denial classifier and the exact assertions read.
func TestMain(m *testing.M) {
	bashsandbox.MaybeRunLauncher()
	if len(os.Args) > 1 && os.Args[1] == helperArg {
		os.Exit(helperMain(os.Args[2:]))
	}
	os.Setenv("LC_ALL", "C")
	code := m.Run()
	helperDir.Do(func() {}) // no helper copy made after this point
	if helperPath != "" {
		os.RemoveAll(filepath.Dir(helperPath))
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s (children: %s)", what, describeChildren())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// describeChildren names this process's children, for failure messages.
func describeChildren() string {
	var out []string
	for _, c := range children() {
		b, _ := os.ReadFile("/proc/" + c + "/cmdline")
		s, _ := os.ReadFile("/proc/" + c + "/stat")
		out = append(out, fmt.Sprintf("%s %q [%s]", c, strings.ReplaceAll(string(b), "\x00", " "), strings.TrimSpace(string(s))))
	}
	return strings.Join(out, "; ")
}

// children lists the pids of this process's live children.
func children() []string {
	var out []string
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err == nil {
			out = append(out, strings.Fields(string(b))...)
		}
	}
	return out
}

// noProcessLeft fails the test if a child of this process outlives it.
func noProcessLeft(t *testing.T) {
	t.Cleanup(func() {
		waitFor(t, "no child process left behind", func() bool { return len(children()) == 0 })
	})
}

// The attack helper: this test binary, copied where a confined command can run it (the
// build directory lies in the host's /tmp, which the sandbox hides), makes the system
// calls an attacker would and prints "ok" or the error.
const helperArg = "__dsh_sandbox_test_helper"

var (
	helperDir  sync.Once
	helperPath string
)

// helper returns the path of the attack helper, copying this binary on first use to a
// directory outside the temp dirs (under the user's cache directory).
func helper(t testing.TB) string {
	t.Helper()
	helperDir.Do(func() {
		base, err := os.UserCacheDir()
		if err != nil {
			return
		}
		if os.MkdirAll(base, 0o755) != nil {
			return
		}
		dir, err := os.MkdirTemp(base, "dsh-sandbox-helper-")
		if err != nil {
			return
		}
		os.Chmod(dir, 0o755)
		src, err := os.Open(os.Args[0])
		if err != nil {
			return
		}
		defer src.Close()
		dst, err := os.OpenFile(filepath.Join(dir, "helper"), os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			return
		}
		_, err = io.Copy(dst, src)
		if dst.Close() != nil || err != nil {
			return
		}
		helperPath = dst.Name()
	})
	if helperPath == "" {
		t.Skip("no directory for the attack helper outside the temp dirs")
	}
	return helperPath
}

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
	case "fds": // the open descriptors, other than the one listing them
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			return err
		}
		var fds []string
		for _, e := range entries {
			if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && !strings.HasPrefix(target, "/proc/") {
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
