package sshtest

import (
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// Mute is a TCP server that accepts connections and never says a word, so that an ssh
// handshake with it hangs (a wedged sshd, a port forwarded to nothing) — or, while
// Hangup is set, closes each one at once (a handshake that fails fast).
type Mute struct {
	// Addr is its host:port on 127.0.0.1.
	Addr string
	// Hangup, while set, closes each accepted connection at once.
	Hangup atomic.Bool

	ln       net.Listener
	accepted atomic.Int32
	mu       sync.Mutex
	conns    []net.Conn
	done     chan struct{}
}

// StartMute starts a Mute server, stopped (its connections closed) when the test ends.
func StartMute(t testing.TB) *Mute {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	m := &Mute{Addr: ln.Addr().String(), ln: ln, done: make(chan struct{})}
	go m.serve()
	t.Cleanup(func() {
		ln.Close()
		<-m.done
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, c := range m.conns {
			c.Close()
		}
	})
	return m
}

func (m *Mute) serve() {
	defer close(m.done)
	for {
		c, err := m.ln.Accept()
		if err != nil {
			return
		}
		m.accepted.Add(1)
		if m.Hangup.Load() {
			c.Close()
			continue
		}
		m.mu.Lock()
		m.conns = append(m.conns, c)
		m.mu.Unlock()
	}
}

// Accepted is how many connections it has accepted.
func (m *Mute) Accepted() int { return int(m.accepted.Load()) }

// ClientFiles writes, in a directory of the test's own, an unencrypted ed25519 identity
// and an empty known_hosts file, for a client that never gets as far as a host key.
func ClientFiles(t testing.TB) (identity, knownHosts string) {
	t.Helper()
	dir := t.TempDir()
	identity, knownHosts = filepath.Join(dir, "id_ed25519"), filepath.Join(dir, "known_hosts")
	writeKey(t, identity)
	writeFile(t, knownHosts, nil)
	return identity, knownHosts
}
