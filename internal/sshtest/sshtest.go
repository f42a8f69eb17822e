// Package sshtest runs a real OpenSSH server for tests: `sshd -D -e -f <generated
// config>` on 127.0.0.1 (a free port), with a freshly generated host key, a client key
// it authorizes for the current user, and a known_hosts file that trusts the host key.
//
// A test that cannot start sshd fails. Only when the environment variable
// DSH_TEST_SSHD=unavailable says that no sshd exists on this machine does Start skip
// the test instead (CI installs openssh-server, so it never skips there).
package sshtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/dsh-dev/dsh/internal/proctest"
)

// UnavailableEnv names the variable that, set to "unavailable", lets tests skip when
// sshd cannot be started.
const UnavailableEnv = "DSH_TEST_SSHD"

// Server is a running sshd and the files a client needs to reach it.
type Server struct {
	// Addr is "127.0.0.1:<port>".
	Addr string
	// User is the login name (the current user).
	User string
	// Dir holds every generated file.
	Dir string
	// IdentityFile is the authorized client private key (OpenSSH format, 0600).
	IdentityFile string
	// KnownHostsFile trusts exactly this server's host key.
	KnownHostsFile string
	// HostKey is the server's public host key.
	HostKey ssh.PublicKey

	t        testing.TB
	opts     Options
	instance string
	sshd     string
	config   string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Options adjust the server.
type Options struct {
	// LoginRC keeps the login shell's usual start-up: Debian's bash sources the remote
	// user's ~/.bashrc for every command sshd runs. By default the server sets SHLVL=1
	// in its sessions, which skips it, so that tests neither depend on nor pay for the
	// machine's rc files.
	LoginRC bool
	// SetEnv adds variables to every session's environment (sshd's SetEnv), as a
	// remote login environment would have them.
	SetEnv map[string]string
	// MaxSessions, when > 0, is sshd's MaxSessions (channels per connection; default
	// 10).
	MaxSessions int
}

// Start generates keys and a config, starts sshd and waits until it accepts
// connections. The server is stopped when the test ends.
func Start(t testing.TB) *Server { return StartWith(t, Options{}) }

// StartWith is Start with options.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		sshd = "/usr/sbin/sshd"
	}
	if _, err := os.Stat(sshd); err != nil {
		unavailable(t, fmt.Sprintf("no sshd binary (%v); install openssh-server", err))
	}
	u, err := user.Current()
	if err != nil {
		t.Fatalf("sshtest: current user: %v", err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o1777); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	s := &Server{t: t, opts: opts, sshd: sshd, Dir: dir, User: u.Username, instance: newInstance(),
		IdentityFile:   filepath.Join(dir, "id_ed25519"),
		KnownHostsFile: filepath.Join(dir, "known_hosts"),
		config:         filepath.Join(dir, "sshd_config"),
	}
	s.HostKey = writeKey(t, filepath.Join(dir, "host_ed25519"))
	clientPub := writeKey(t, s.IdentityFile)
	writeFile(t, filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(clientPub))
	if os.Geteuid() == 0 {
		// sshd running as root needs its privilege-separation directory.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatalf("sshtest: %v", err)
		}
	}

	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port := freePort(t)
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		writeFile(t, s.config, []byte(s.configText(port)))
		if lastErr = s.start(); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("sshtest: cannot start sshd (set %s=unavailable to skip on a machine without it): %v", UnavailableEnv, lastErr)
	}
	s.TrustHostKey(s.KnownHostsFile, s.HostKey)
	t.Cleanup(func() {
		s.Stop()
		s.checkLeftovers()
		if t.Failed() {
			t.Logf("sshd log (%s):\n%s", s.Addr, s.Log())
		}
	})
	return s
}

func unavailable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(UnavailableEnv) == "unavailable" {
		t.Skipf("sshtest: %s (%s=unavailable)", why, UnavailableEnv)
	}
	t.Fatalf("sshtest: %s (set %s=unavailable to skip on a machine without sshd)", why, UnavailableEnv)
}

func (s *Server) configText(port int) string {
	lines := []string{
		"Port " + strconv.Itoa(port),
		"ListenAddress 127.0.0.1",
		"HostKey " + filepath.Join(s.Dir, "host_ed25519"),
		"AuthorizedKeysFile " + filepath.Join(s.Dir, "authorized_keys"),
		"PidFile none",
		"StrictModes no",
		"UsePAM no",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PubkeyAuthentication yes",
		"PermitRootLogin prohibit-password",
		"PrintMotd no",
		"UseDNS no",
		"MaxStartups 64",
		"LogLevel ERROR",
	}
	// Every process started through this server carries the instance's id, so that
	// the cleanup can tell whether any is left.
	env := map[string]string{instanceEnv: s.instance, "TMPDIR": s.tmp()}
	if !s.opts.LoginRC {
		// bash sources ~/.bashrc in a shell it believes sshd started, unless SHLVL says
		// it is nested: tests must not depend on (nor pay for) the machine's rc files.
		env["SHLVL"] = "1"
	}
	for k, v := range s.opts.SetEnv {
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	words := make([]string, len(keys))
	for i, k := range keys {
		words[i] = strconv.Quote(k + "=" + env[k])
	}
	lines = append(lines, "SetEnv "+strings.Join(words, " "))
	if s.opts.MaxSessions > 0 {
		lines = append(lines, "MaxSessions "+strconv.Itoa(s.opts.MaxSessions))
	}
	return strings.Join(lines, "\n") + "\n"
}

// start runs sshd with the current config and waits until it accepts a connection.
func (s *Server) start() error {
	cmd := exec.Command(s.sshd, "-D", "-e", "-f", s.config)
	// A file, not a pipe: per-connection processes inherit it, and Wait must not wait
	// for them to close it.
	log, err := os.OpenFile(filepath.Join(s.Dir, "sshd.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("sshd exited: %s", strings.TrimSpace(s.Log()))
		default:
		}
		c, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("sshd does not accept connections on %s: %v", s.Addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop ends sshd: the listener and every sshd process serving a connection, which
// drops every client connection. Commands started through it keep running (OpenSSH
// puts each in a session of its own). Stop is idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	listener := cmd.Process.Pid
	// Stopped, the listener forks no new connection process while they are collected
	// (each connection's processes lead sessions of their own: not in its group).
	_ = syscall.Kill(listener, syscall.SIGSTOP)
	pids := append(sshdDescendants(listener), listener)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	<-done
	if !proctest.Until(5*time.Second, func() bool { return proctest.AllGone(pids...) }) {
		s.t.Errorf("sshtest: sshd processes survive SIGKILL: %s", proctest.Describe(pids))
	}
}

// instanceEnv names the variable that marks every process started through a Server.
const instanceEnv = "SSHTEST_INSTANCE"

func newInstance() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x", b)
}

// tmp is the sessions' TMPDIR: a directory of the server's own, so that what remote
// programs leave in their temp directory is seen (and removed) with the server.
func (s *Server) tmp() string { return filepath.Join(s.Dir, "tmp") }

// checkLeftovers fails the test if a process started through the server is still
// running when the test ends (after its clients were closed): every command must have
// ended or been killed; and if the sessions' TMPDIR is not empty then (the remote
// executor's control shells remove what they create there). It allows a few seconds
// for kills in flight.
func (s *Server) checkLeftovers() {
	var procs []int
	var ents []os.DirEntry
	if proctest.Until(5*time.Second, func() bool {
		procs = s.started()
		ents, _ = os.ReadDir(s.tmp())
		return len(procs) == 0 && len(ents) == 0
	}) {
		return
	}
	if len(procs) > 0 {
		s.t.Errorf("sshtest: processes started through sshd are still running after the test: %v", procs)
		proctest.KillPids(procs...)
	}
	for _, e := range ents {
		s.t.Errorf("sshtest: left in the sessions' TMPDIR: %s", e.Name())
	}
}

// started lists the live processes whose environment carries this server's instance.
func (s *Server) started() []int { return proctest.Carrying(instanceEnv + "=" + s.instance) }

// Freeze stops (SIGSTOP) every sshd process serving a connection: the connections stay
// open but nothing answers, as with a host that hangs. Thaw resumes them.
func (s *Server) Freeze() { s.signalSessions(syscall.SIGSTOP) }

// Thaw resumes what Freeze stopped.
func (s *Server) Thaw() { s.signalSessions(syscall.SIGCONT) }

func (s *Server) signalSessions(sig syscall.Signal) {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	for _, pid := range sshdDescendants(cmd.Process.Pid) {
		_ = syscall.Kill(pid, sig)
	}
}

// Restart starts sshd again, on the same port with the same keys.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond) // the port may still be held by a dying sshd
	}
	s.t.Fatalf("sshtest: restarting sshd: %v", err)
}

// Log is what sshd wrote so far (its -e log).
func (s *Server) Log() string {
	data, _ := os.ReadFile(filepath.Join(s.Dir, "sshd.log"))
	return string(data)
}

// Config is the `ssh` plugin config that reaches this server, with extra keys merged.
func (s *Server) Config(extra map[string]any) map[string]any {
	c := map[string]any{
		"address":        s.Addr,
		"user":           s.User,
		"identityFile":   s.IdentityFile,
		"knownHostsFile": s.KnownHostsFile,
	}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

// TrustHostKey writes a known_hosts file at path that trusts key for this server.
func (s *Server) TrustHostKey(path string, key ssh.PublicKey) {
	s.t.Helper()
	writeFile(s.t, path, []byte(KnownHostsLine(s.Addr, key)+"\n"))
}

// KnownHostsLine is the known_hosts line trusting key for address (host:port).
func KnownHostsLine(address string, key ssh.PublicKey) string {
	return knownhosts.Line([]string{knownhosts.Normalize(address)}, key)
}

// NewHostKey returns a fresh public key, unrelated to the server's (to make a
// known_hosts file that names the server with a different key).
func NewHostKey(t testing.TB) ssh.PublicKey {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// WriteKey writes a new ed25519 key pair (OpenSSH formats) at path and path.pub, and
// returns the public key: a client key for a Config without a server.
func WriteKey(t testing.TB, path string) ssh.PublicKey { return writeKey(t, path) }

// writeKey is WriteKey.
func writeKey(t testing.TB, path string) ssh.PublicKey {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, pem.EncodeToMemory(block))
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path+".pub", ssh.MarshalAuthorizedKey(sp))
	return sp
}

func writeFile(t testing.TB, path string, data []byte) {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// sshdDescendants lists the live sshd processes descending from pid.
func sshdDescendants(root int) []int {
	children := map[int][]proctest.Proc{}
	for _, p := range proctest.Processes() {
		children[p.Ppid] = append(children[p.Ppid], p)
	}
	var out []int
	var walk func(int)
	walk = func(pid int) {
		for _, c := range children[pid] {
			if c.State != 'Z' && strings.HasPrefix(c.Comm, "sshd") {
				out = append(out, c.Pid)
			}
			walk(c.Pid)
		}
	}
	walk(root)
	return out
}

// GroupMembers lists the live processes of process group pgid.
func GroupMembers(pgid int) []int {
	var out []int
	for _, p := range proctest.Processes() {
		if p.Pgid == pgid && p.State != 'Z' {
			out = append(out, p.Pid)
		}
	}
	return out
}
