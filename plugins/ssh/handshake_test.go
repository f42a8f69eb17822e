package ssh_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/internal/sshtest"
	"github.com/dsh-dev/dsh/plugins/ssh"
	"github.com/dsh-dev/dsh/proc"
)

// A command whose deadline passes while the connection it waits for is stuck in the
// ssh handshake never started: it ends with an infrastructure error that names the
// host and says so — not as a timeout of the command, which would read as if it ran.
func TestHungHandshakeIsAnInfrastructureError(t *testing.T) {
	m := sshtest.StartMute(t)
	cfg := ssh.DefaultConfig()
	cfg.Address, cfg.User, cfg.SpillRoot = m.Addr, "dev", t.TempDir()
	cfg.IdentityFile, cfg.KnownHostsFile = sshtest.ClientFiles(t)
	h, err := ssh.New(cfg, ssh.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	s := spec("echo never")
	s.Deadline = time.Now().Add(300 * time.Millisecond)
	p, err := h.Start(context.Background(), s)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	ex := proctest.AwaitExit(t, p, 10*time.Second)
	want := "ssh: connection to " + cfg.Address + " timed out during the handshake; the command did not start"
	var ct *ssh.ConnectTimeoutError
	if ex.Err == nil || ex.Err.Error() != want || !errors.As(ex.Err, &ct) || !ct.Handshake {
		t.Errorf("exit %+v, want Err %q", ex, want)
	}
	if ex.Reason != proc.ReasonNone || ex.Code != nil || ex.Signal != "" || ex.State() != proc.Killed || p.Pid() != 0 {
		t.Errorf("exit %+v (pid %d): want no reason, code or signal, and no pid", ex, p.Pid())
	}
	if out, errs := p.Stdout().Output(), p.Stderr().Output(); out.Bytes != 0 || errs.Bytes != 0 {
		t.Errorf("output %q %q", out.Text, errs.Text)
	}
	if m.Accepted() == 0 {
		t.Error("the server never accepted the connection: the handshake did not begin")
	}
}

// The other wording, before the handshake: the TCP connect had not finished.
func TestConnectTimeoutErrorWording(t *testing.T) {
	for _, tc := range []struct {
		e    ssh.ConnectTimeoutError
		want string
	}{
		{ssh.ConnectTimeoutError{Address: "build-1:22", Handshake: true}, "ssh: connection to build-1:22 timed out during the handshake; the command did not start"},
		{ssh.ConnectTimeoutError{Address: "build-1:22"}, "ssh: connection to build-1:22 timed out during the TCP connect; the command did not start"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.e, got, tc.want)
		}
	}
}
