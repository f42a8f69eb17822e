package approval_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/approval"
)

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	proctest.WaitFor(t, 10*time.Second, "the condition", cond)
}

// syncBuffer is a goroutine-safe output sink.
type syncBuffer = proctest.Buffer

func TestTerminalPrompterAnswers(t *testing.T) {
	cases := []struct {
		input string
		want  container.Answer
	}{
		{"y\n", container.Accepted},
		{"YES\n", container.Accepted},
		{"  yes  \n", container.Accepted},
		{"n\n", container.Declined},
		{"no\n", container.Declined},
		{"\n", container.Declined}, // the default
		{"", container.Cancelled},  // end of input
		{"y", container.Accepted},  // a last line without newline still counts
		{"what?\ny\n", container.Accepted},
		{"a\nb\nc\ny\n", container.Cancelled}, // three unclear answers
	}
	for _, tc := range cases {
		t.Run(strings.TrimSpace(tc.input), func(t *testing.T) {
			inR, inW := io.Pipe()
			out := &syncBuffer{}
			p := &approval.TerminalPrompter{In: inR, Out: out}
			go func() {
				io.WriteString(inW, tc.input)
				inW.Close()
			}()
			got, err := p.Confirm(context.Background(), "Run it?\n")
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("answer = %q, want %q", got, tc.want)
			}
			if !strings.HasPrefix(out.String(), "Run it?\n\nAllow once? [y/N] ") {
				t.Fatalf("terminal output = %q", out.String())
			}
			inR.Close()
		})
	}
}

func TestTerminalPrompterReasksOnUnclearInput(t *testing.T) {
	inR, inW := io.Pipe()
	defer inR.Close()
	out := &syncBuffer{}
	p := &approval.TerminalPrompter{In: inR, Out: out}
	go func() {
		io.WriteString(inW, "sure\nn\n")
		inW.Close()
	}()
	got, err := p.Confirm(context.Background(), "Q")
	if err != nil || got != container.Declined {
		t.Fatalf("got %q, %v", got, err)
	}
	if want := "Q\n\nAllow once? [y/N] Please answer y or n. Allow once? [y/N] "; out.String() != want {
		t.Fatalf("output = %q, want %q", out.String(), want)
	}
}

func TestTerminalPrompterCancelWhileWaiting(t *testing.T) {
	inR, inW := io.Pipe()
	out := &syncBuffer{}
	p := &approval.TerminalPrompter{In: inR, Out: out}

	// Cancelled while waiting: returns at once with ctx's error.
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := p.Confirm(ctx, "first")
		errc <- err
	}()
	waitFor(t, func() bool { return strings.Contains(out.String(), "first") })
	cancel()
	if err := <-errc; err != context.Canceled {
		t.Fatalf("cancelled Confirm: err = %v, want context.Canceled", err)
	}

	// The read left pending by the cancelled question answers the next one.
	answer := make(chan container.Answer, 1)
	go func() {
		a, err := p.Confirm(context.Background(), "second")
		if err != nil {
			t.Error(err)
		}
		answer <- a
	}()
	waitFor(t, func() bool { return strings.Contains(out.String(), "second") })
	io.WriteString(inW, "n\n")
	if a := <-answer; a != container.Declined {
		t.Fatalf("second answer = %q, want decline", a)
	}
	inW.Close()
	inR.Close()
}

func TestTerminalPrompterReadError(t *testing.T) {
	inR, inW := io.Pipe()
	inW.CloseWithError(io.ErrClosedPipe)
	p := &approval.TerminalPrompter{In: inR, Out: &syncBuffer{}}
	if _, err := p.Confirm(context.Background(), "q"); err == nil {
		t.Fatal("a broken terminal did not report an error")
	}
	if _, err := (&approval.TerminalPrompter{}).Confirm(context.Background(), "q"); err == nil {
		t.Fatal("a prompter without In/Out did not report an error")
	}
}
