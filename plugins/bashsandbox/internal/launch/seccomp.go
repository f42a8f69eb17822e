package launch

import "syscall"

// The seccomp filter of every confined command. Whatever the network policy:
//
//   - add_key, request_key and keyctl fail with ENOSYS (as on a kernel without keys):
//     kernel keyrings are not namespaced, and a command would otherwise inherit the
//     harness's session keyring (Kerberos tickets, other secrets its login stored
//     there) to read and change, and reach the host user's own keyring without a user
//     namespace.
//   - clone3 fails with ENOSYS (as on a kernel before 5.3; libc falls back to clone)
//     on the Landlock-only backend: CLONE_INTO_CGROUP would let a command start a
//     child in any cgroup whose cgroup.procs its user may write — the kernel checks
//     nothing else, neither the read-only mount nor Landlock — out of reach of the
//     timeout, the kill and the limits of its own cgroup. A filter cannot read clone3's
//     arguments (they are in memory); clone(2), whose flags it could, has no way into
//     another cgroup. That box does not call clone3 either (place_linux.go). The
//     namespace backend masks the cgroup file systems instead (a command has no cgroup
//     to name), and its box places commands with clone3.
//
//   - ioctl TIOCSTI and TIOCLINUX fail with EPERM (as on a kernel with
//     dev.tty.legacy_tiocsti off): TIOCSTI types into a terminal's input, and on the
//     Landlock-only backend a command can open the host's terminals; TIOCLINUX pastes
//     into a virtual console. No command needs to type into its own terminal either.
//
// With the network denied, too: Landlock (ABI < 9) cannot stop UNIX sockets, UDP
// (ABI < 10) or Multipath TCP, so socket(2) itself is filtered:
//
//   - AF_UNIX sockets cannot be created (EACCES): a read-only mount does not stop
//     connect(2) to a pathname socket (a tmux server in /tmp, an ssh-agent,
//     docker.sock), and abstract sockets of the host are reachable without a network
//     namespace.
//   - socketpair(2) makes only AF_UNIX SOCK_STREAM pairs (others fail with EACCES): a
//     connected stream pair reaches nothing outside, and pipelines and programs need
//     them; a datagram socket of a pair is not connected for good, and sendto(2) or
//     connect(2) on it reaches any pathname datagram socket of the host its user may
//     write (journald's, syslog's, a daemon's control socket), descriptors included.
//   - Only AF_INET, AF_INET6 and AF_NETLINK remain (raw and packet sockets, vsock,
//     Bluetooth… fail with EACCES). With a network namespace, inet sockets reach only
//     its own loopback; without one (Landlock-only) only TCP is allowed (SOCK_STREAM
//     with protocol 0 or IPPROTO_TCP), which Landlock restricts, so UDP, raw, SCTP and
//     Multipath TCP sockets fail with EACCES.
//   - IPPROTO_MPTCP sockets fail with EACCES (Landlock's TCP rules do not cover them).
//   - sendto, sendmsg and sendmmsg with MSG_FASTOPEN fail with EACCES: a TCP Fast Open
//     send connects without connect(2), where Landlock's connect rule is checked.
//   - listen(2) fails with EACCES: Landlock refuses every TCP bind, so a socket that
//     listens was never bound, and listen(2) on it binds an ephemeral port without
//     bind(2), where Landlock's rule is checked — reachable from outside without a
//     network namespace, and a server on the box's loopback with one.
//   - io_uring_setup, io_uring_enter and io_uring_register fail with ENOSYS: io_uring
//     can open sockets without socket(2).
//   - socketcall(2) (32-bit x86 and ARM) fails with EACCES: its arguments are in memory,
//     out of a filter's reach.

// Kernel constants (linux/audit.h, linux/seccomp.h, linux/filter.h, linux/in.h,
// linux/socket.h).
const (
	auditArchX8664   = 0xc000003e
	auditArchI386    = 0x40000003
	auditArchAarch64 = 0xc00000b7
	auditArchArm     = 0x40000028
	x32SyscallBit    = 0x40000000

	seccompSetModeFilter = 1
	seccompRetErrno      = 0x00050000
	seccompRetAllow      = 0x7fff0000

	bpfLd  = 0x00
	bpfW   = 0x00
	bpfAbs = 0x20
	bpfAlu = 0x04
	bpfAnd = 0x50
	bpfJmp = 0x05
	bpfJeq = 0x10
	bpfK   = 0x00
	bpfRet = 0x06

	afUnix    = 1
	afInet    = 2
	afInet6   = 10
	afNetlink = 16

	sockStream   = 1
	sockTypeMask = 0xf

	ipprotoTCP   = 6
	ipprotoMPTCP = 262

	msgFastOpen = 0x20000000

	tiocsti   = 0x5412 // asm-generic/ioctls.h: the same on x86, arm and arm64
	tioclinux = 0x541c

	sysClone3 = 435 // the same number on every architecture

	sysIoUringSetup    = 425 // the same number on every architecture
	sysIoUringEnter    = 426
	sysIoUringRegister = 427
)

// Filtered whatever the network policy; every other filtered call only when the
// network is denied.
func (a filterAction) always() bool { return a == actKeyring || a == actClone3 || a == actIoctl }

// seccomp_data offsets: nr (u32), arch (u32), instruction_pointer (u64), args[6] (u64);
// an int argument is compared on its low 32 bits, which come first on little-endian
// machines (every architecture with a filter here).
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
	offArg1 = 16 + 8
	offArg2 = 16 + 2*8
	offArg3 = 16 + 3*8
)

// filterAction is what the filter does with one system call of one architecture.
type filterAction int

const (
	actSocket     filterAction = iota // check the socket(2) arguments
	actSocketpair                     // check the socketpair(2) arguments: AF_UNIX SOCK_STREAM only
	actSendFlags2                     // fail with EACCES when the flags (argument 2) hold MSG_FASTOPEN
	actSendFlags3                     // fail with EACCES when the flags (argument 3) hold MSG_FASTOPEN
	actENOSYS                         // fail with ENOSYS
	actEACCES                         // fail with EACCES
	actKeyring                        // a keyring call: fail with ENOSYS, whatever the network
	actClone3                         // clone3: fail with ENOSYS, whatever the network
	actIoctl                          // ioctl: TIOCSTI and TIOCLINUX fail with EPERM, whatever the network
)

// filterTargets are the labels of commandFilter each action jumps to.
var filterTargets = map[filterAction]string{
	actSocket: "socket", actSocketpair: "socketpair", actSendFlags2: "send2", actSendFlags3: "send3",
	actENOSYS: "enosys", actEACCES: "eacces", actKeyring: "enosys", actClone3: "enosys",
	actIoctl: "ioctl",
}

// archCalls are the filtered system calls of one architecture.
type archCalls struct {
	arch  uint32
	calls []archCall
}

type archCall struct {
	nr  uint32
	act filterAction
}

// bpfProg assembles a classic BPF program with symbolic jump targets.
type bpfProg struct {
	insns []syscall.SockFilter
	jumps []bpfJump
	at    map[string]int
}

type bpfJump struct {
	pc     int
	jt, jf string // "" = the next instruction
}

func (p *bpfProg) label(name string) {
	if p.at == nil {
		p.at = map[string]int{}
	}
	p.at[name] = len(p.insns)
}

func (p *bpfProg) stmt(code uint16, k uint32) {
	p.insns = append(p.insns, syscall.SockFilter{Code: code, K: k})
}

func (p *bpfProg) load(off uint32) { p.stmt(bpfLd|bpfW|bpfAbs, off) }

func (p *bpfProg) ret(k uint32) { p.stmt(bpfRet|bpfK, k) }

// jeq jumps to jt when the accumulator equals k, else to jf.
func (p *bpfProg) jeq(k uint32, jt, jf string) {
	p.jumps = append(p.jumps, bpfJump{pc: len(p.insns), jt: jt, jf: jf})
	p.insns = append(p.insns, syscall.SockFilter{Code: bpfJmp | bpfJeq | bpfK, K: k})
}

// link resolves the jumps; it reports false when a target is unknown, behind the jump
// or too far (the program is then unusable).
func (p *bpfProg) link() bool {
	for _, j := range p.jumps {
		for i, name := range [2]string{j.jt, j.jf} {
			off := 0
			if name != "" {
				at, ok := p.at[name]
				if !ok || at <= j.pc || at-j.pc-1 > 255 {
					return false
				}
				off = at - j.pc - 1
			}
			if i == 0 {
				p.insns[j.pc].Jt = uint8(off)
			} else {
				p.insns[j.pc].Jf = uint8(off)
			}
		}
	}
	return true
}

// commandFilter assembles the filter described above for the architectures in arches:
// with denyNetwork, the socket rules too, where streamOnly restricts inet sockets to
// TCP (no network namespace); allowClone3 leaves clone3 alone (the box needs it where
// it cannot hold commands at their exec: see HoldAtExec).
func commandFilter(arches []archCalls, denyNetwork, streamOnly, allowClone3 bool) []syscall.SockFilter {
	var p bpfProg
	p.load(offArch)
	for i, a := range arches {
		next := "arch" + string(rune('a'+i+1))
		p.label("arch" + string(rune('a'+i)))
		p.jeq(a.arch, "", next)
		p.load(offNr)
		for _, c := range a.calls {
			if !denyNetwork && !c.act.always() || allowClone3 && c.act == actClone3 {
				continue
			}
			p.jeq(c.nr, filterTargets[c.act], "")
		}
		p.ret(seccompRetAllow)
	}
	p.label("arch" + string(rune('a'+len(arches))))
	p.ret(seccompRetAllow)

	p.label("socket")
	p.load(offArg0)
	p.jeq(afInet, "inet", "")
	p.jeq(afInet6, "inet", "")
	p.jeq(afNetlink, "allow", "eacces")
	p.label("inet")
	if streamOnly {
		p.load(offArg1)
		p.stmt(bpfAlu|bpfAnd|bpfK, sockTypeMask)
		p.jeq(sockStream, "", "eacces")
		p.load(offArg2)
		p.jeq(0, "allow", "")
		p.jeq(ipprotoTCP, "allow", "eacces")
	} else {
		p.load(offArg2)
		p.jeq(ipprotoMPTCP, "eacces", "allow")
	}

	p.label("socketpair")
	p.load(offArg0)
	p.jeq(afUnix, "", "eacces")
	p.load(offArg1)
	p.stmt(bpfAlu|bpfAnd|bpfK, sockTypeMask)
	p.jeq(sockStream, "allow", "eacces")

	for _, send := range []struct {
		label string
		flags uint32
	}{{"send2", offArg2}, {"send3", offArg3}} {
		p.label(send.label)
		p.load(send.flags)
		p.stmt(bpfAlu|bpfAnd|bpfK, msgFastOpen)
		p.jeq(0, "allow", "eacces")
	}
	p.label("ioctl")
	p.load(offArg1)
	p.jeq(tiocsti, "eperm", "")
	p.jeq(tioclinux, "eperm", "allow")
	p.label("enosys")
	p.ret(seccompRetErrno | uint32(syscall.ENOSYS))
	p.label("eperm")
	p.ret(seccompRetErrno | uint32(syscall.EPERM))
	p.label("eacces")
	p.ret(seccompRetErrno | uint32(syscall.EACCES))
	p.label("allow")
	p.ret(seccompRetAllow)
	if !p.link() {
		panic("launch: the seccomp filter does not assemble")
	}
	return p.insns
}

// calls concatenates lists of calls (this package imports no slices).
func calls(lists ...[]archCall) []archCall {
	var out []archCall
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// keyrings are the keyring calls of one architecture: add_key, request_key and keyctl,
// numbered consecutively from first (offset by base for x32).
func keyrings(base, first uint32) []archCall {
	return []archCall{{base + first, actKeyring}, {base + first + 1, actKeyring}, {base + first + 2, actKeyring}}
}

// sockets are the socket calls of one architecture the filter checks, by number:
// socket, socketpair, listen, sendto, sendmsg and sendmmsg.
func sockets(socket, socketpair, listen, sendto, sendmsg, sendmmsg uint32) []archCall {
	return []archCall{
		{socket, actSocket}, {socketpair, actSocketpair}, {listen, actEACCES},
		{sendto, actSendFlags3}, {sendmsg, actSendFlags2}, {sendmmsg, actSendFlags3},
	}
}

// ioUring are the io_uring calls of one architecture (offset by base for x32).
func ioUring(base uint32) []archCall {
	return []archCall{
		{base + sysIoUringSetup, actENOSYS},
		{base + sysIoUringEnter, actENOSYS},
		{base + sysIoUringRegister, actENOSYS},
	}
}
