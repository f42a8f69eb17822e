package ssh_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/internal/sshtest"
	"github.com/dsh-dev/dsh/plugins/ssh"
	"github.com/dsh-dev/dsh/proc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func config(srv *sshtest.Server, t *testing.T) *ssh.Config {
	cfg := ssh.DefaultConfig()
	cfg.Address, cfg.User, cfg.IdentityFile, cfg.KnownHostsFile = srv.Addr, srv.User, srv.IdentityFile, srv.KnownHostsFile
	cfg.SpillRoot = t.TempDir()
	return cfg
}

// newHost returns a connected Host for srv (closed when the test ends) and its state
// log.
func newHost(t *testing.T, srv *sshtest.Server, tune func(*ssh.Config)) (*ssh.Host, *proctest.Record) {
	t.Helper()
	cfg := config(srv, t)
	if tune != nil {
		tune(cfg)
	}
	st := &proctest.Record{}
	h, err := ssh.New(cfg, ssh.Options{Logger: quietLogger(), OnState: st.Add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	if err := h.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h, st
}

var capture = proc.Capture{MaxBytes: 64000, SpillMaxBytes: 1 << 20}

func spec(command string) ssh.Spec {
	return ssh.Spec{Command: command, Dir: "/", Stdout: capture, Stderr: capture, GraceMs: 500}
}

func start(t *testing.T, h *ssh.Host, s ssh.Spec) *ssh.Process {
	t.Helper()
	p, err := h.Start(context.Background(), s)
	if err != nil {
		t.Fatalf("Start(%q): %v", s.Command, err)
	}
	return p
}

func run(t *testing.T, h *ssh.Host, s ssh.Spec) (proc.Exit, string, string) {
	t.Helper()
	p := start(t, h, s)
	ex := proctest.AwaitExit(t, p, 30*time.Second)
	return ex, p.Stdout().Output().Text, p.Stderr().Output().Text
}

// readUntil polls the stream until it holds want.
func readUntil(t *testing.T, s *proc.Stream, want string) {
	t.Helper()
	proctest.WaitFor(t, 20*time.Second, "output "+want, func() bool { return strings.Contains(s.Output().Text, want) })
}

// gone reports whether process group pgid has no live member on this machine (the
// remote host of the tests).
func gone(pgid int) bool { return len(sshtest.GroupMembers(pgid)) == 0 }
