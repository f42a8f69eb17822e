package ssh_test

import (
	"context"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/sshtest"
	dshssh "github.com/dsh-dev/dsh/plugins/ssh"
	"github.com/dsh-dev/dsh/plugins/subprocess"
)

func TestSmoke(t *testing.T) {
	srv := sshtest.Start(t)
	cfg := dshssh.DefaultConfig()
	cfg.Address, cfg.User, cfg.IdentityFile, cfg.KnownHostsFile = srv.Addr, srv.User, srv.IdentityFile, srv.KnownHostsFile
	h, err := dshssh.New(cfg, dshssh.Options{OnState: func(s string) { t.Log("state:", s) }})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	home, err := h.Home(context.Background())
	t.Log(home, err)
	cap := subprocess.Capture{MaxBytes: 1000}
	start := time.Now()
	p, err := h.Start(context.Background(), dshssh.Spec{Command: "echo hi $DSH_X; echo err >&2; pwd; exit 3", Dir: "/tmp", DshEnv: map[string]string{"DSH_X": "a'b c"}, Stdout: cap, Stderr: cap, GraceMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	ex, _ := p.Exit()
	t.Logf("%v pid=%d exit=%+v code=%v out=%q err=%q", time.Since(start), p.Pid(), ex, *ex.Code, p.Stdout().Output().Text, p.Stderr().Output().Text)
	start = time.Now()
	p, err = h.Start(context.Background(), dshssh.Spec{Command: "sleep 300 & sleep 60", Dir: "/tmp", Stdout: cap, Stderr: cap, GraceMs: 1000, Deadline: time.Now().Add(500 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	ex, _ = p.Exit()
	t.Logf("%v pid=%d exit=%+v members=%v", time.Since(start), p.Pid(), ex, sshtest.GroupMembers(p.Pid()))
	start = time.Now()
	p, err = h.Start(context.Background(), dshssh.Spec{Command: "trap '' TERM; sleep 60", Dir: "/tmp", Stdout: cap, Stderr: cap, GraceMs: 500, Deadline: time.Now().Add(300 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	ex, _ = p.Exit()
	t.Logf("%v pid=%d exit=%+v members=%v", time.Since(start), p.Pid(), ex, sshtest.GroupMembers(p.Pid()))
	_, err = h.Start(context.Background(), dshssh.Spec{Command: "true", Dir: "/nope", Stdout: cap, Stderr: cap, GraceMs: 500})
	t.Log(err)
}
