package subprocess

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/proc"
)

// A reader that only gets to run after the drain deadline passed (a starved goroutine on
// a loaded machine) still captures what the pipe buffers; only then does it stop.
func TestReaderStartingAfterDrainDeadlineKeepsBufferedBytes(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close() // held open, like an orphan would: no EOF ever comes
	want := make([]byte, 60000)
	for i := range want {
		want[i] = byte('a' + i%26)
	}
	if _, err := w.Write(want); err != nil {
		t.Fatal(err)
	}
	if err := r.SetReadDeadline(time.Now()); err != nil {
		t.Fatalf("pipes must be pollable: %v", err)
	}
	sp := proc.NewSpool(proc.SpoolOptions{Root: t.TempDir()})
	defer sp.Close()
	s := sp.NewStream("", proc.Capture{MaxBytes: 1 << 20})
	defer s.Close()
	p := &Process{}
	p.readers.Add(1)
	done := make(chan struct{})
	go func() { p.readLoop(r, s); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader kept waiting after the deadline")
	}
	if got := s.Output().Text; got != string(want) {
		t.Errorf("captured %d bytes, want %d", len(got), len(want))
	}
}

// Without pidfds (Linux < 5.3) the leader is reaped with a blocking wait4.
func TestReapWithoutPidfd(t *testing.T) {
	proctest.NoLeftovers(t)
	saved := pidfdSupported
	pidfdSupported = func() bool { return false }
	defer func() { pidfdSupported = saved }()
	sup := New(Options{DisableCgroups: true, SpillRoot: t.TempDir()})
	defer sup.Close()
	for script, want := range map[string]proc.Exit{
		"exit 7":        {Code: ptr(7)},
		"kill -TERM $$": {Signal: "SIGTERM"},
	} {
		p, err := sup.Spawn(context.Background(), Spec{Argv: []string{"bash", "-c", script}, GraceMs: 1000,
			Stdout: proc.Capture{MaxBytes: 10}, Stderr: proc.Capture{MaxBytes: 10}})
		if err != nil {
			t.Fatal(err)
		}
		if p.pidfd != -1 {
			t.Fatalf("pidfd %d with pidfds disabled", p.pidfd)
		}
		<-p.Done()
		ex, _ := p.Exit()
		if ex.Signal != want.Signal || (ex.Code == nil) != (want.Code == nil) || (ex.Code != nil && *ex.Code != *want.Code) {
			t.Errorf("%q: exit %+v", script, ex)
		}
	}
}

func ptr(n int) *int { return &n }
