package bashssh_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"go.uber.org/goleak"

	"github.com/dsh-dev/dsh/internal/sshtest"
	"github.com/dsh-dev/dsh/plugins/ssh"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newHost returns a connected ssh service for srv, closed when the test ends.
func newHost(t testing.TB, srv *sshtest.Server, tune func(*ssh.Config)) *ssh.Host {
	t.Helper()
	cfg := ssh.DefaultConfig()
	cfg.Address, cfg.User, cfg.IdentityFile, cfg.KnownHostsFile = srv.Addr, srv.User, srv.IdentityFile, srv.KnownHostsFile
	cfg.SpillRoot = t.TempDir()
	if tune != nil {
		tune(cfg)
	}
	h, err := ssh.New(cfg, ssh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	if err := h.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
