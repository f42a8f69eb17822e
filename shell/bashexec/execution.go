package bashexec

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/proc"
	"github.com/dsh-dev/dsh/shell"
)

// execution projects one Process into the seam's Execution.
type execution struct {
	name      string
	process   Process
	timeoutMs int64
	finish    FinishFunc

	mu             sync.Mutex // guards the read cursors
	outOff, errOff int64

	once sync.Once
	res  shell.RunResult
	err  error // the infrastructure failure that ended the process, if any
}

// Result waits for the command (or for ctx, which bounds the wait only).
func (x *execution) Result(ctx context.Context) (shell.RunResult, error) {
	select {
	case <-x.process.Done():
	default:
		select {
		case <-x.process.Done():
		case <-ctx.Done():
			return shell.RunResult{}, fmt.Errorf("%s: waiting for the result: %w", x.name, context.Cause(ctx))
		}
	}
	x.once.Do(x.build)
	if x.err != nil {
		return shell.RunResult{}, x.err
	}
	return cloneResult(x.res), nil
}

func (x *execution) build() {
	ex, _ := x.process.Exit()
	if ex.Err != nil {
		x.err = ex.Err
		return
	}
	x.res = shell.RunResult{
		ExitCode:  ex.Code,
		Signal:    ex.Signal,
		TimedOut:  ex.Reason == proc.ReasonTimeout,
		Aborted:   ex.Reason == proc.ReasonAbort,
		TimeoutMs: x.timeoutMs,
		Stdout:    streamResult(x.process.Stdout().Output()),
		Stderr:    streamResult(x.process.Stderr().Output()),
		Budget:    ex.Budget.Clone(),
	}
	if x.finish != nil {
		x.finish(&x.res)
	}
}

func cloneResult(r shell.RunResult) shell.RunResult {
	if r.ExitCode != nil {
		c := *r.ExitCode
		r.ExitCode = &c
	}
	if r.Sandbox != nil {
		s := *r.Sandbox
		r.Sandbox = &s
	}
	r.Budget = r.Budget.Clone()
	return r
}

func streamResult(o proc.Output) shell.StreamResult {
	text := o.Text
	if o.Truncated {
		text = trimLeadingPartialRune(text)
	}
	return shell.StreamResult{Text: text, Truncated: o.Truncated, SpillPath: o.SpillPath, Bytes: o.Bytes}
}

// ReadOutput returns the output since the previous read: stdout, then a "[stderr]"
// section when stderr produced anything. While the command runs, an incomplete UTF-8
// sequence at the end of a stream is held back for the next read.
func (x *execution) ReadOutput() shell.ProcessRead {
	x.mu.Lock()
	defer x.mu.Unlock()
	_, settled := x.process.Exit()
	running := !settled
	out, outLossy := x.take(x.process.Stdout(), &x.outOff, running)
	errs, errLossy := x.take(x.process.Stderr(), &x.errOff, running)
	read := shell.ProcessRead{Delta: joinStreams(out, errs), Lossy: outLossy || errLossy}
	if outLossy {
		read.StdoutSpillPath = x.process.Stdout().SpillPath()
	}
	if errLossy {
		read.StderrSpillPath = x.process.Stderr().SpillPath()
	}
	return read
}

func (x *execution) take(s *proc.Stream, off *int64, running bool) ([]byte, bool) {
	c := s.Since(*off)
	data, next := c.Data, c.Next
	if running {
		if k := partialRuneSuffix(data); k > 0 {
			data, next = data[:len(data)-k], next-int64(k)
		}
	}
	if c.Lossy {
		data = []byte(trimLeadingPartialRune(string(data)))
	}
	*off = next
	return data, c.Lossy
}

// joinStreams renders stdout and stderr the way the bash tool does: the stdout text,
// then, when stderr is non-empty, a newline if needed and "[stderr]\n<stderr>".
func joinStreams(out, errs []byte) string {
	if len(errs) == 0 {
		return string(out)
	}
	var b strings.Builder
	b.Grow(len(out) + len(errs) + 10)
	b.Write(out)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		b.WriteByte('\n')
	}
	b.WriteString("[stderr]\n")
	b.Write(errs)
	return b.String()
}

// OutputBytes is how much the command wrote to stdout and stderr so far.
func (x *execution) OutputBytes() int64 { return x.process.Stdout().Len() + x.process.Stderr().Len() }

func (x *execution) Kill() bool            { return x.process.Kill() }
func (x *execution) Done() <-chan struct{} { return x.process.Done() }
func (x *execution) Pid() int              { return x.process.Pid() }

// Exit is the process's exit, a copy (results are values).
func (x *execution) Exit() (proc.Exit, bool) {
	ex, ok := x.process.Exit()
	if ex.Code != nil {
		c := *ex.Code
		ex.Code = &c
	}
	ex.Budget = ex.Budget.Clone()
	return ex, ok
}

// failedExecution is the handle of a spawn the host refused: settled killed, with the
// failure as its only (stderr) output, and Result returning it.
type failedExecution struct {
	name string
	err  error
	done chan struct{}

	mu   sync.Mutex
	read bool
}

func failed(name string, err error) *failedExecution {
	f := &failedExecution{name: name, err: err, done: make(chan struct{})}
	close(f.done)
	return f
}

func (f *failedExecution) Result(context.Context) (shell.RunResult, error) {
	return shell.RunResult{}, fmt.Errorf("%s: %w", f.name, f.err)
}

func (f *failedExecution) ReadOutput() shell.ProcessRead {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.read {
		return shell.ProcessRead{}
	}
	f.read = true
	return shell.ProcessRead{Delta: joinStreams(nil, []byte(f.err.Error()+"\n"))}
}

func (f *failedExecution) Kill() bool            { return false }
func (f *failedExecution) Done() <-chan struct{} { return f.done }
func (f *failedExecution) Pid() int              { return 0 }
func (f *failedExecution) Exit() (proc.Exit, bool) {
	return proc.Exit{Err: fmt.Errorf("%s: %w", f.name, f.err)}, true
}

// partialRuneSuffix returns the length of an incomplete UTF-8 sequence at the end of b
// (0 when b ends on a rune boundary or with invalid bytes that will never complete).
func partialRuneSuffix(b []byte) int {
	for k := 1; k <= 3 && k <= len(b); k++ {
		c := b[len(b)-k]
		if c < 0x80 {
			return 0
		}
		if c >= 0xC0 { // a leading byte: is its sequence longer than what we have?
			need := 0
			switch {
			case c >= 0xF0:
				need = 4
			case c >= 0xE0:
				need = 3
			default:
				need = 2
			}
			if need > k {
				return k
			}
			return 0
		}
	}
	return 0
}

// trimLeadingPartialRune drops UTF-8 continuation bytes at the start of a tail cut in
// the middle of a rune.
func trimLeadingPartialRune(s string) string {
	i := 0
	for i < 3 && i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// LastOutput is when either stream last received bytes.
func (x *execution) LastOutput() time.Time {
	a, b := x.process.Stdout().LastWrite(), x.process.Stderr().LastWrite()
	if b.After(a) {
		return b
	}
	return a
}

// Tail is the last n bytes of the stream written last (stdout when neither was).
func (x *execution) Tail(n int) []byte {
	s := x.process.Stdout()
	if e := x.process.Stderr(); e.LastWrite().After(s.LastWrite()) {
		s = e
	}
	return s.Since(max(s.Len()-int64(n), 0)).Data
}

// Detach takes back the deadline and the context of a process that supports it.
func (x *execution) Detach() bool {
	d, ok := x.process.(DetachableProcess)
	return ok && d.Detach()
}

// terminalExecution is the execution of a command under a terminal: its input goes to
// the terminal.
type terminalExecution struct {
	*execution
	tty TerminalProcess
}

var _ shell.Input = (*terminalExecution)(nil)

func (x *terminalExecution) WriteInput(ctx context.Context, p []byte) error {
	return x.tty.WriteInput(ctx, p)
}
func (x *terminalExecution) CloseInput(ctx context.Context) error { return x.tty.CloseInput(ctx) }
func (x *terminalExecution) Resize(t shell.Terminal) error        { return x.tty.Resize(t) }
func (x *terminalExecution) WaitingForInput() (waiting, known bool) {
	return x.tty.WaitingForInput()
}
