package bashssh_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"

	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/dsh-dev/dsh/internal/sshtest"
	bashlocal "github.com/dsh-dev/dsh/plugins/bashlocal"
	bashssh "github.com/dsh-dev/dsh/plugins/bashssh"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/shell"
	"github.com/dsh-dev/dsh/shell/bashexec"
)

// Each benchmark has its floors as sibling sub-benchmarks, so one run measures all:
//
//	go test -run '^$' -bench . -benchmem ./plugins/bashssh/
//
// The remote host is this machine's sshd on 127.0.0.1: the figures are the protocol's
// and the remote shells' cost, without network latency.
func BenchmarkTrue(b *testing.B) {
	srv := sshtest.Start(b)
	b.Run("bash-ssh", func(b *testing.B) { runTrue(b, sshExecutor(b, srv)) })
	b.Run("bash-local", func(b *testing.B) { runTrue(b, localExecutor(b)) })
	// The floor over ssh: one session channel running `true` through the login shell on
	// an open connection, with golang.org/x/crypto/ssh alone; and the same with the two
	// bash starts that bash-ssh's wrapper adds (the script, then `bash -c <command>`).
	for _, c := range []struct{ name, command string }{
		{"x-crypto-session", "true"},
		{"x-crypto-session-two-bash", "exec bash --norc -c 'exec bash --norc -c true'"},
	} {
		b.Run(c.name, func(b *testing.B) {
			client := dial(b, srv)
			b.ReportAllocs()
			for b.Loop() {
				s, err := client.NewSession()
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Run(c.command); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("os-exec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command("bash", "-c", "true")
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// With the login shell's usual start-up: Debian's bash sources the remote user's
	// ~/.bashrc for every command sshd runs (whatever it costs on the host).
	rc := sshtest.StartWith(b, sshtest.Options{LoginRC: true})
	b.Run("bash-ssh-with-bashrc", func(b *testing.B) { runTrue(b, sshExecutor(b, rc)) })
}

// 50 concurrent `true` per operation.
func BenchmarkTrue50Concurrent(b *testing.B) {
	srv := sshtest.Start(b)
	b.Run("bash-ssh", func(b *testing.B) { runConcurrent(b, sshExecutor(b, srv), 50) })
	b.Run("bash-local", func(b *testing.B) { runConcurrent(b, localExecutor(b), 50) })
}

func sshExecutor(b *testing.B, srv *sshtest.Server) shell.Executor {
	h := newHost(b, srv, nil)
	cfg := bashexec.DefaultConfig()
	cfg.Cwd = "/"
	ex, err := bashssh.New(h, &bashssh.Config{Config: cfg})
	if err != nil {
		b.Fatal(err)
	}
	return ex
}

func localExecutor(b *testing.B) shell.Executor {
	sup := subprocess.New(subprocess.Options{SpillRoot: b.TempDir()})
	b.Cleanup(sup.Close)
	ex, err := bashlocal.New(sup, &bashlocal.Config{Config: bashexec.DefaultConfig()})
	if err != nil {
		b.Fatal(err)
	}
	return ex
}

func runOnce(b *testing.B, ex shell.Executor) {
	ctx := context.Background()
	spec, err := ex.Resolve(shell.ExecRequest{Command: "true"})
	if err != nil {
		b.Fatal(err)
	}
	x, err := ex.Execute(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	res, err := x.Result(ctx)
	if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
		b.Fatalf("%+v %v", res, err)
	}
}

func runTrue(b *testing.B, ex shell.Executor) {
	runOnce(b, ex) // warm: connections up, remote home known
	b.ReportAllocs()
	for b.Loop() {
		runOnce(b, ex)
	}
}

func runConcurrent(b *testing.B, ex shell.Executor, n int) {
	runOnce(b, ex)
	b.ReportAllocs()
	for b.Loop() {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() { runOnce(b, ex) })
		}
		wg.Wait()
	}
}

func dial(b *testing.B, srv *sshtest.Server) *xssh.Client {
	key, err := os.ReadFile(srv.IdentityFile)
	if err != nil {
		b.Fatal(err)
	}
	signer, err := xssh.ParsePrivateKey(key)
	if err != nil {
		b.Fatal(err)
	}
	known, err := knownhosts.New(srv.KnownHostsFile)
	if err != nil {
		b.Fatal(err)
	}
	c, err := xssh.Dial("tcp", srv.Addr, &xssh.ClientConfig{User: srv.User, Auth: []xssh.AuthMethod{xssh.PublicKeys(signer)}, HostKeyCallback: known})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}
