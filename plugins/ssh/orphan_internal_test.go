package ssh

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/internal/sshtest"
	"github.com/dsh-dev/dsh/proc"
)

// A command whose start line a lost connection kept from dsh has no known pid: it is
// found again, on the next connection, by the tag in its environment — with what it
// started, also outside its process group.
func TestOrphanWithoutStartLineIsFoundByTag(t *testing.T) {
	srv := sshtest.Start(t)
	cfg := DefaultConfig()
	cfg.Address, cfg.User, cfg.IdentityFile, cfg.KnownHostsFile = srv.Addr, srv.User, srv.IdentityFile, srv.KnownHostsFile
	cfg.SpillRoot = t.TempDir()
	h, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	if err := h.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	pids := filepath.Join(t.TempDir(), "pids")
	capture := proc.Capture{MaxBytes: 4096}
	p, err := h.Start(ctx, Spec{Command: "echo $$ > " + pids + "; setsid sleep 60 & echo $! >> " + pids + "; exec sleep 60",
		Dir: "/", Stdout: capture, Stderr: capture, GraceMs: 500})
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	proctest.WaitFor(t, 10*time.Second, "two pids", func() bool { got = proctest.ReadPids(pids); return len(got) == 2 })

	h.mu.Lock()
	c := h.conns[0]
	h.mu.Unlock()
	outcome, err := group{tag: p.tag, graceMs: 500}.kill(h, c)
	if err != nil || outcome != "done" && outcome != "killed" {
		t.Fatalf("kill by tag: %q, %v", outcome, err)
	}
	if !proctest.AllGone(got...) {
		t.Errorf("processes %v are left after the kill by tag", got)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the command did not settle")
	}
}
