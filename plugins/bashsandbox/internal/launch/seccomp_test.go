//go:build linux && (amd64 || arm64)

package launch

import (
	"encoding/binary"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// run interprets the filter's classic BPF (the subset it uses) on one system call.
func run(t *testing.T, prog []syscall.SockFilter, arch, nr uint32, args ...uint64) uint32 {
	t.Helper()
	var data [64]byte
	binary.LittleEndian.PutUint32(data[0:], nr)
	binary.LittleEndian.PutUint32(data[4:], arch)
	for i, a := range args {
		binary.LittleEndian.PutUint64(data[16+8*i:], a)
	}
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case bpfLd | bpfW | bpfAbs:
			acc = binary.LittleEndian.Uint32(data[in.K:])
		case bpfAlu | bpfAnd | bpfK:
			acc &= in.K
		case bpfJmp | bpfJeq | bpfK:
			if acc == in.K {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case bpfRet | bpfK:
			return in.K
		default:
			t.Fatalf("instruction %d: unexpected code %#x", pc, in.Code)
		}
	}
	t.Fatal("the filter fell off its end")
	return 0
}

func TestNetworkFilter(t *testing.T) {
	native := filterArches[0].arch
	socketNr := filterArches[0].calls[0].nr
	allow, eacces, enosys := uint32(seccompRetAllow), uint32(seccompRetErrno|uint32(syscall.EACCES)), uint32(seccompRetErrno|uint32(syscall.ENOSYS))
	for _, tc := range []struct {
		denyNetwork, streamOnly bool
	}{{true, false}, {true, true}, {false, false}} {
		prog := commandFilter(filterArches, tc.denyNetwork, tc.streamOnly, false)
		if len(prog) > 255 {
			t.Fatalf("%d instructions", len(prog))
		}
		denied := func(v uint32) uint32 {
			if tc.denyNetwork {
				return v
			}
			return allow
		}
		dgram := allow
		if tc.streamOnly {
			dgram = eacces
		}
		for _, c := range []struct {
			name string
			nr   uint32
			args []uint64
			want uint32
		}{
			{"tcp", socketNr, []uint64{unix.AF_INET, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, 0}, allow},
			{"tcp6", socketNr, []uint64{unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_TCP}, allow},
			{"udp", socketNr, []uint64{unix.AF_INET, unix.SOCK_DGRAM | unix.SOCK_NONBLOCK, 0}, denied(dgram)},
			{"raw", socketNr, []uint64{unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP}, denied(dgram)},
			{"mptcp", socketNr, []uint64{unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP}, denied(eacces)},
			{"unix", socketNr, []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0}, denied(eacces)},
			{"unix with garbage above the int", socketNr, []uint64{1<<40 | unix.AF_UNIX, unix.SOCK_STREAM, 0}, denied(eacces)},
			{"packet", socketNr, []uint64{unix.AF_PACKET, unix.SOCK_RAW, 0}, denied(eacces)},
			{"vsock", socketNr, []uint64{unix.AF_VSOCK, unix.SOCK_STREAM, 0}, denied(eacces)},
			{"netlink", socketNr, []uint64{unix.AF_NETLINK, unix.SOCK_RAW, 0}, allow},
			{"tcp with a protocol but TCP", socketNr, []uint64{unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP}, denied(dgram)},
			{"socketpair", unix.SYS_SOCKETPAIR, []uint64{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, 0}, allow},
			{"datagram socketpair", unix.SYS_SOCKETPAIR, []uint64{unix.AF_UNIX, unix.SOCK_DGRAM, 0}, denied(eacces)},
			{"seqpacket socketpair", unix.SYS_SOCKETPAIR, []uint64{unix.AF_UNIX, unix.SOCK_SEQPACKET | unix.SOCK_NONBLOCK, 0}, denied(eacces)},
			{"socketpair of another family", unix.SYS_SOCKETPAIR, []uint64{unix.AF_TIPC, unix.SOCK_STREAM, 0}, denied(eacces)},
			{"listen", unix.SYS_LISTEN, []uint64{3, 16}, denied(eacces)},
			{"sendto", unix.SYS_SENDTO, []uint64{3, 0, 1, unix.MSG_NOSIGNAL}, allow},
			{"sendto fast open", unix.SYS_SENDTO, []uint64{3, 0, 1, unix.MSG_FASTOPEN | unix.MSG_NOSIGNAL}, denied(eacces)},
			{"sendmsg", unix.SYS_SENDMSG, []uint64{3, 0, unix.MSG_DONTWAIT}, allow},
			{"sendmsg fast open", unix.SYS_SENDMSG, []uint64{3, 0, unix.MSG_FASTOPEN}, denied(eacces)},
			{"sendmmsg", unix.SYS_SENDMMSG, []uint64{3, 0, 1, 0}, allow},
			{"sendmmsg fast open", unix.SYS_SENDMMSG, []uint64{3, 0, 1, unix.MSG_FASTOPEN}, denied(eacces)},
			{"clone3", unix.SYS_CLONE3, []uint64{0, 88}, enosys},
			{"clone", unix.SYS_CLONE, []uint64{uint64(unix.SIGCHLD)}, allow},
			{"io_uring_setup", unix.SYS_IO_URING_SETUP, nil, denied(enosys)},
			{"io_uring_enter", unix.SYS_IO_URING_ENTER, nil, denied(enosys)},
			{"io_uring_register", unix.SYS_IO_URING_REGISTER, nil, denied(enosys)},
			{"add_key", unix.SYS_ADD_KEY, nil, enosys},
			{"request_key", unix.SYS_REQUEST_KEY, nil, enosys},
			{"keyctl", unix.SYS_KEYCTL, []uint64{unix.KEYCTL_READ}, enosys},
			{"ioctl TIOCSTI", unix.SYS_IOCTL, []uint64{0, unix.TIOCSTI}, seccompRetErrno | uint32(syscall.EPERM)},
			{"ioctl TCGETS", unix.SYS_IOCTL, []uint64{0, unix.TCGETS}, allow},
			{"read", unix.SYS_READ, nil, allow},
		} {
			if got := run(t, prog, native, c.nr, c.args...); got != c.want {
				t.Errorf("denyNetwork %v, streamOnly %v, %s: %#x, want %#x", tc.denyNetwork, tc.streamOnly, c.name, got, c.want)
			}
		}
		// Every other architecture the kernel runs here is filtered the same way.
		for _, a := range filterArches[1:] {
			for _, c := range a.calls {
				var want uint32
				var args []uint64
				switch c.act {
				case actSocket:
					args, want = []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0}, denied(eacces)
				case actSocketpair:
					args, want = []uint64{unix.AF_UNIX, unix.SOCK_DGRAM, 0}, denied(eacces)
				case actSendFlags2:
					args, want = []uint64{3, 0, unix.MSG_FASTOPEN}, denied(eacces)
				case actSendFlags3:
					args, want = []uint64{3, 0, 1, unix.MSG_FASTOPEN}, denied(eacces)
				case actClone3:
					want = enosys
				case actEACCES:
					want = denied(eacces)
				case actENOSYS:
					want = denied(enosys)
				case actKeyring:
					want = enosys
				case actIoctl:
					args, want = []uint64{0, unix.TIOCSTI}, seccompRetErrno|uint32(syscall.EPERM)
				}
				if got := run(t, prog, a.arch, c.nr, args...); got != want {
					t.Errorf("denyNetwork %v: arch %#x call %d: %#x, want %#x", tc.denyNetwork, a.arch, c.nr, got, want)
				}
			}
		}
		if got := run(t, prog, filterArches[1].arch, filterArches[1].calls[1].nr, unix.AF_UNIX, unix.SOCK_STREAM); got != allow {
			t.Errorf("a stream socketpair of the other architecture: %#x", got)
		}
		if got := run(t, prog, 0x12345678, socketNr, unix.AF_UNIX); got != allow {
			t.Errorf("unknown architecture: %#x", got)
		}
	}
}

// Where the box cannot hold commands at their exec it places them with clone3, which
// the filter then leaves alone.
func TestFilterAllowingClone3(t *testing.T) {
	prog := commandFilter(filterArches, true, false, true)
	if got := run(t, prog, filterArches[0].arch, unix.SYS_CLONE3, 0, 88); got != seccompRetAllow {
		t.Errorf("clone3: %#x", got)
	}
	if got := run(t, prog, filterArches[0].arch, unix.SYS_LISTEN, 3, 1); got != seccompRetErrno|uint32(syscall.EACCES) {
		t.Errorf("listen: %#x", got)
	}
	for cmd, want := range map[uint32]uint32{unix.TIOCSTI: seccompRetErrno | uint32(syscall.EPERM),
		unix.TIOCLINUX: seccompRetErrno | uint32(syscall.EPERM), unix.TCGETS: seccompRetAllow, unix.TIOCGPTN: seccompRetAllow} {
		if got := run(t, prog, filterArches[0].arch, unix.SYS_IOCTL, 0, uint64(cmd)); got != want {
			t.Errorf("ioctl %#x: %#x, want %#x", cmd, got, want)
		}
	}
}

// The native numbers of the filtered calls are this architecture's.
func TestFilterNumbers(t *testing.T) {
	want := map[uint32]filterAction{
		unix.SYS_SOCKET: actSocket, unix.SYS_SOCKETPAIR: actSocketpair, unix.SYS_LISTEN: actEACCES,
		unix.SYS_SENDTO: actSendFlags3, unix.SYS_SENDMSG: actSendFlags2, unix.SYS_SENDMMSG: actSendFlags3,
		unix.SYS_CLONE3: actClone3, unix.SYS_IO_URING_SETUP: actENOSYS, unix.SYS_IO_URING_ENTER: actENOSYS,
		unix.SYS_IO_URING_REGISTER: actENOSYS, unix.SYS_ADD_KEY: actKeyring, unix.SYS_REQUEST_KEY: actKeyring,
		unix.SYS_KEYCTL: actKeyring, unix.SYS_IOCTL: actIoctl,
	}
	got := map[uint32]filterAction{}
	for _, c := range filterArches[0].calls {
		if c.nr&x32SyscallBit == 0 {
			got[c.nr] = c.act
		}
	}
	for nr, act := range want {
		if g, ok := got[nr]; !ok || g != act {
			t.Errorf("call %d: %v (filtered %v), want %v", nr, g, ok, act)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d native calls filtered, want %d", len(got), len(want))
	}
}
