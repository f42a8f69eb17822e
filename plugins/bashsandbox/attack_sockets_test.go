package bashsandbox_test

// Sockets under `network: deny` that reach outside without socket(2) or connect(2):
// TCP Fast Open sends, listen(2) on a socket never bound, UNIX datagram socket pairs
// (docs/sandbox.md, "No reach outside"), on both backends.

import (
	"net"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/container"
)

// backends are the two ways a box is built: in namespaces of its own, and Landlock
// only (`namespaces: off`).
var backends = []struct {
	name   string
	config map[string]any
}{{"namespaces", nil}, {"landlock-only", map[string]any{"namespaces": "off"}}}

// forBackendsAndModes runs fn on each backend, in each confined mode.
func forBackendsAndModes(t *testing.T, fn func(t *testing.T, st *stack, s *container.Session, ws string)) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			forConfinedModes(t, stackSetup{bashConfig: be.config}, fn)
		})
	}
}

// A TCP listener on the host's 127.0.0.1 gets no connection from a Fast Open send
// (sendto with MSG_FASTOPEN connects without connect(2), where Landlock checks), and a
// socket never bound cannot listen (listen(2) would bind it to an ephemeral port
// without bind(2): on every host address without a network namespace, on the box's
// loopback with one).
func TestConfinedNoFastOpenOrListen(t *testing.T) {
	port, accepted := tcpListener(t)
	forBackendsAndModes(t, func(t *testing.T, st *stack, s *container.Session, ws string) {
		for _, tc := range []struct{ op, arg, want string }{
			{"fastopen", "127.0.0.1:" + port, "permission denied"},
			{"listen", "", "permission denied"},
			{"socket", "2", "ok"}, // a TCP socket may still exist (its connect and bind are denied)
		} {
			args := []string{tc.arg}
			if tc.op == "socket" {
				args = []string{"2", "1", "0"}
			}
			if got := attackLine(t, st, s, tc.op, args...); got != tc.want {
				t.Errorf("%s %s: %q, want %q", tc.op, tc.arg, got, tc.want)
			}
		}
		if n := accepted(); n != 0 {
			t.Fatalf("the host's listener accepted %d connections", n)
		}
	})
}

// A pathname datagram socket of the host (as journald's or a daemon's control socket
// would be) receives nothing: no UNIX datagram socket can be made, neither by
// socket(2) nor as a socket pair, so nothing can sendto(2) it. Stream pairs still work,
// and so do pipelines.
func TestConfinedNoUnixDatagrams(t *testing.T) {
	forBackendsAndModes(t, func(t *testing.T, st *stack, s *container.Session, ws string) {
		dir := outsideTempDir(t, "dsh-sandbox-dgram-")
		path := filepath.Join(dir, "control.sock")
		host, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		defer host.Close()
		for _, tc := range []struct {
			op   string
			args []string
			want string
		}{
			{"dgram-pair", []string{path}, "permission denied"},
			{"dgram-unix", []string{path}, "permission denied"},
			{"socketpair", []string{strconv.Itoa(syscall.SOCK_DGRAM)}, "permission denied"},
			{"socketpair", []string{strconv.Itoa(syscall.SOCK_SEQPACKET)}, "permission denied"},
			{"socketpair", []string{strconv.Itoa(syscall.SOCK_STREAM | syscall.SOCK_CLOEXEC)}, "ok"},
		} {
			if got := attackLine(t, st, s, tc.op, tc.args...); got != tc.want {
				t.Errorf("%s %q: %q, want %q", tc.op, tc.args, got, tc.want)
			}
		}
		if queued(t, host) { // UNIX datagrams are queued when sendto returns
			t.Fatal("the host's socket received a datagram")
		}
		expect(t, st.bash(t, s, "seq 1 3 | grep -v 2 | tr '\\n' ' '"), "1 3 ", false)
	})
}

// queued reports whether a datagram, or for a listener a connection, waits on c —
// without waiting for one (a read with a deadline already passed would not even look).
func queued(t *testing.T, c syscall.Conn) bool {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ready bool
	if err := rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		ready = err == nil && n == 1
	}); err != nil {
		t.Fatal(err)
	}
	return ready
}
