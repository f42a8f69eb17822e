package approval

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/dsh-dev/dsh/container"
)

// TerminalPrompter is a container.Prompter for a user at a terminal (`dsh call` on a
// tty): it writes the message to Out (escaped, EscapeForTerminal), a blank line and
// the question, and reads the answer line from In.
//
// Confirm asks "Allow once? [y/N] ": "y"/"yes" accepts, "n"/"no" or an empty line
// declines (the default). ConfirmForSession asks "Allow once, for the session, or not?
// [o/s/N] ": "o"/"once" (or "y"/"yes") accepts once, "s"/"session" for the session,
// "n"/"no"/"not" or an empty line declines. Either way end of input cancels, and
// anything else is asked again, at most three times, then cancels. A ctx cancelled
// while waiting returns ctx's error at once; the read already started is kept and
// answers the next question, unless its line arrived before that question was shown
// (then it is discarded as stale). Questions are asked one at a time.
type TerminalPrompter struct {
	// In is where answers are read from (the terminal).
	In io.Reader
	// Out is where questions are written to (the terminal).
	Out io.Writer

	mu      sync.Mutex
	reader  *bufio.Reader
	pending chan lineResult // the read in flight, if any
}

type lineResult struct {
	line string
	err  error
}

var _ container.SessionPrompter = (*TerminalPrompter)(nil)

// maxAttempts bounds how often an unclear answer is asked again.
const maxAttempts = 3

// choices is one kind of terminal question: what it asks, what it says to an unclear
// answer, and the answers it understands (the empty line among them).
type choices struct {
	question string
	again    string
	answers  map[string]container.Answer
}

var (
	onceOrNot = choices{
		question: "Allow once? [y/N] ",
		again:    "Please answer y or n. ",
		answers:  map[string]container.Answer{"y": container.Accepted, "yes": container.Accepted, "n": container.Declined, "no": container.Declined, "": container.Declined},
	}
	onceSessionOrNot = choices{
		question: "Allow once, for the session, or not? [o/s/N] ",
		again:    "Please answer o, s or n. ",
		answers: map[string]container.Answer{
			"o": container.Accepted, "once": container.Accepted, "y": container.Accepted, "yes": container.Accepted,
			"s": container.AcceptedForSession, "session": container.AcceptedForSession,
			"n": container.Declined, "no": container.Declined, "not": container.Declined, "": container.Declined,
		},
	}
)

// Confirm shows message and asks whether to allow it once.
func (p *TerminalPrompter) Confirm(ctx context.Context, message string) (container.Answer, error) {
	return p.ask(ctx, message, onceOrNot)
}

// ConfirmForSession shows message and asks whether to allow it once, for the rest of
// the session, or not.
func (p *TerminalPrompter) ConfirmForSession(ctx context.Context, message string) (container.Answer, error) {
	return p.ask(ctx, message, onceSessionOrNot)
}

func (p *TerminalPrompter) ask(ctx context.Context, message string, c choices) (container.Answer, error) {
	if p.In == nil || p.Out == nil {
		return "", errors.New("approval: terminal prompter needs both In and Out")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if p.reader == nil {
		p.reader = bufio.NewReader(p.In)
	}
	if p.pending != nil {
		select {
		case <-p.pending:
			// Typed before this question was shown: not an answer to it.
			p.pending = nil
		default:
		}
	}
	// The approval service's questions are escaped already; a message from elsewhere must
	// not act on the terminal either.
	prompt := EscapeForTerminal(strings.TrimRight(message, "\n")) + "\n\n" + c.question
	for attempt := 1; ; attempt++ {
		if _, err := io.WriteString(p.Out, prompt); err != nil {
			return "", fmt.Errorf("approval: write to terminal: %w", err)
		}
		line, err := p.readLine(ctx)
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		answer := strings.ToLower(strings.TrimSpace(line))
		if a, ok := c.answers[answer]; ok && (answer != "" || err == nil) {
			return a, nil
		}
		switch {
		case err == io.EOF:
			io.WriteString(p.Out, "\n")
			return container.Cancelled, nil
		case err != nil:
			return "", fmt.Errorf("approval: read from terminal: %w", err)
		}
		if attempt == maxAttempts {
			io.WriteString(p.Out, "No clear answer; cancelled.\n")
			return container.Cancelled, nil
		}
		prompt = c.again + c.question
	}
}

// readLine returns the next input line (a partial last line comes with io.EOF), or
// returns early with ctx's error, leaving the read pending.
func (p *TerminalPrompter) readLine(ctx context.Context) (string, error) {
	if p.pending == nil {
		ch := make(chan lineResult, 1)
		r := p.reader
		go func() {
			line, err := r.ReadString('\n')
			ch <- lineResult{line, err}
		}()
		p.pending = ch
	}
	select {
	case res := <-p.pending:
		p.pending = nil
		return res.line, res.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// OpenTerminal opens the process's controlling terminal (/dev/tty) and returns a
// TerminalPrompter on it, with the function that closes it. It fails when the process
// has no controlling terminal; callers then leave the session without a Prompter, and
// `ask` requests are answered `unavailable`.
func OpenTerminal() (*TerminalPrompter, func() error, error) {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("approval: no terminal: %w", err)
	}
	return &TerminalPrompter{In: tty, Out: tty}, tty.Close, nil
}
