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
		prog := commandFilter(filterArches, tc.denyNetwork, tc.streamOnly)
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
			{"socketpair", unix.SYS_SOCKETPAIR, []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0}, allow},
			{"io_uring_setup", unix.SYS_IO_URING_SETUP, nil, denied(enosys)},
			{"io_uring_enter", unix.SYS_IO_URING_ENTER, nil, denied(enosys)},
			{"io_uring_register", unix.SYS_IO_URING_REGISTER, nil, denied(enosys)},
			{"add_key", unix.SYS_ADD_KEY, nil, enosys},
			{"request_key", unix.SYS_REQUEST_KEY, nil, enosys},
			{"keyctl", unix.SYS_KEYCTL, []uint64{unix.KEYCTL_READ}, enosys},
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
				case actEACCES:
					want = denied(eacces)
				case actENOSYS:
					want = denied(enosys)
				case actKeyring:
					want = enosys
				}
				if got := run(t, prog, a.arch, c.nr, args...); got != want {
					t.Errorf("denyNetwork %v: arch %#x call %d: %#x, want %#x", tc.denyNetwork, a.arch, c.nr, got, want)
				}
			}
		}
		if got := run(t, prog, 0x12345678, socketNr, unix.AF_UNIX); got != allow {
			t.Errorf("unknown architecture: %#x", got)
		}
	}
}
