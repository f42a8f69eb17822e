package approval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/approval"
	"github.com/dsh-dev/dsh/shell"
)

// These tests put the real terminal prompt on a real terminal: a private tmux server
// with one 80×24 window runs this test binary again as a helper (screenHelperVar names
// its case file), and the test reads the screen back with `tmux capture-pane`.

// screenHelperVar, when set, makes the test binary run one screen case instead of the
// tests (see TestMain).
const screenHelperVar = "DSH_APPROVAL_SCREEN_CASE"

// screenCase is what the helper does: ask req through an `ask` approver on the
// controlling terminal (writing the outcome next to the case file), or write Output
// through EscapeForTerminal (or raw, to show what the escaping prevents).
type screenCase struct {
	Request    approval.Request
	Cwd        string
	Output     string
	Raw        bool
	OutputOnly bool
}

// runScreenHelper runs the case in file and returns the exit code.
func runScreenHelper(file string) int {
	data, err := os.ReadFile(file)
	var c screenCase
	if err == nil {
		err = json.Unmarshal(data, &c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if c.OutputOnly {
		if !c.Raw {
			c.Output = approval.EscapeForTerminal(c.Output)
		}
		io.WriteString(os.Stdout, c.Output)
		// Stay until told: a pty whose last writer is gone may lose what it holds.
		_, _ = io.ReadAtLeast(os.Stdin, make([]byte, 1), 1)
		return 0
	}
	p, closeTTY, err := approval.OpenTerminal()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer closeTTY()
	a, err := approval.New(approval.PolicyAsk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return 2
	}
	c.Request.Session = &container.Session{ID: "screen", Cwd: c.Cwd, Prompter: p}
	outcome := a.Request(context.Background(), c.Request)
	if err := os.WriteFile(file+".tmp", []byte(outcome), 0o600); err != nil {
		return 2
	}
	if err := os.Rename(file+".tmp", file+".outcome"); err != nil {
		return 2
	}
	return 0
}

// screen is a tmux server of the test's own, with one 80×24 window running one case.
type screen struct {
	t    *testing.T
	sock string
}

// startScreen starts the tmux server running c in its only window.
func startScreen(t *testing.T, c screenCase) (*screen, string) {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "case.json")
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "tmux.conf")
	// No status line (all 24 rows are the window's), and scrollback for the whole prompt.
	if err := os.WriteFile(conf, []byte("set -g status off\nset -g history-limit 10000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &screen{t: t, sock: filepath.Join(dir, "tmux.sock")}
	helper := "exec " + shellQuote(os.Args[0]) + " -test.run='^$'"
	s.tmux("-f", conf, "new-session", "-d", "-x", "80", "-y", "24", "-s", "prompt",
		"-e", screenHelperVar+"="+file, helper)
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", s.sock, "kill-server").Run() })
	return s, file
}

// tmux runs one tmux command against the server and returns its output.
func (s *screen) tmux(args ...string) string {
	s.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-u", "-S", s.sock}, args...)...)
	cmd.Env = append(withoutTmux(os.Environ()), "LC_ALL=C.UTF-8", "TERM=xterm-256color")
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func withoutTmux(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "TMUX=") && !strings.HasPrefix(kv, "TMUX_PANE=") {
			out = append(out, kv)
		}
	}
	return out
}

// rows is the visible screen, one string per logical line (wrapped rows joined), with
// trailing blanks and empty last lines removed.
func (s *screen) rows() []string {
	return trimLines(s.tmux("capture-pane", "-p", "-J", "-t", "prompt"))
}

// history is everything the window showed, scrollback included, lines joined.
func (s *screen) history() []string {
	return trimLines(s.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "prompt"))
}

func trimLines(out string) []string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// screenRows is how many 80-column rows lines take.
func screenRows(lines []string) int {
	n := 0
	for _, l := range lines {
		n += max(1, (utf8.RuneCountInString(l)+79)/80)
	}
	return n
}

const question = "Allow once? [y/N]"

// On a real 80×24 terminal, the prompt of each forgery shows the whole request, as the
// message has it, with the line naming the real mode last before the question; an
// answer typed at the terminal decides it.
func TestPromptOnARealTerminal(t *testing.T) {
	var every, blanks strings.Builder
	for _, f := range forgers {
		every.WriteString("x" + f.char)
		blanks.WriteString(f.char)
	}
	cases := []struct {
		name   string
		req    approval.Request
		answer string
		want   approval.Outcome
	}{
		{"forged-command", forgedCommand, "n", approval.Rejected},
		{"forged-justification", forgedJustification, "n", approval.Rejected},
		{"each-character", approval.Request{Tool: "bash", Command: "echo " + every.String() + "\n" + strings.Repeat(blanks.String(), 4),
			Mode: shell.ModeWorkspaceWrite, Justification: "a\u2028b\u2029c" + blanks.String()}, "y", approval.AllowedOnce},
		{"long-justification", approval.Request{Tool: "bash", Command: "make dist", Mode: shell.ModeDangerFullAccess,
			Justification: strings.Repeat("the build needs it ", 200000)[:2_000_000]}, "n", approval.Rejected},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Session = nil
			s, file := startScreen(t, screenCase{Request: tc.req, Cwd: "/home/u/project"})
			tc.req.Session = &container.Session{ID: "screen", Cwd: "/home/u/project"}
			want := strings.Split(approval.Message(tc.req)+"\n\n"+question, "\n")
			modeLine := want[len(want)-3]
			if !strings.HasPrefix(modeLine, "Requested sandbox mode: "+tc.req.Mode+" (") {
				t.Fatalf("the message's mode line is %q", modeLine)
			}

			var rows []string
			proctest.WaitFor(t, 10*time.Second, "the question on the screen", func() bool {
				rows = s.rows()
				return len(rows) > 0 && rows[len(rows)-1] == question
			})
			// The real mode is the last line before the question.
			if got := rows[len(rows)-3:]; got[0] != modeLine || got[1] != "" {
				t.Fatalf("the screen ends with %q, want the mode line, a blank line, the question", got)
			}
			// Everything the message says reached the terminal, character for character.
			if got := s.history(); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("the terminal shows:\n%s\n--- want:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			// The whole request fits on the screen — except a justification cut at
			// 2,000 characters, 25 rows by itself: its end and everything after it do.
			if screenRows(want) <= 24 {
				if strings.Join(rows, "\n") != strings.Join(want, "\n") {
					t.Fatalf("the screen shows:\n%s\n--- want all of:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
				}
			} else if screen := strings.Join(rows, "\n"); !strings.Contains(screen, "… (1998000 more characters)\n\nWorkspace: /home/u/project\n"+modeLine+"\n\n"+question) {
				t.Fatalf("the screen shows:\n%s", screen)
			}
			if tc.name == "forged-justification" {
				// Row by row, nothing the padding placed starts a row.
				for _, row := range strings.Split(s.tmux("capture-pane", "-p", "-t", "prompt"), "\n") {
					if strings.HasPrefix(row, "Command: ") || strings.HasPrefix(row, "Requested sandbox mode: workspace-write") {
						t.Fatalf("a forged row %q:\n%s", row, strings.Join(rows, "\n"))
					}
				}
			}

			s.tmux("send-keys", "-t", "prompt", tc.answer, "Enter")
			var got []byte
			proctest.WaitFor(t, 10*time.Second, "the outcome", func() bool {
				var err error
				got, err = os.ReadFile(file + ".outcome")
				return err == nil
			})
			if approval.Outcome(got) != tc.want {
				t.Fatalf("answered %q: outcome %q, want %q", tc.answer, got, tc.want)
			}
		})
	}
}

// `dsh call` output on a real terminal, escaped: the title stays and the concealed
// text is plain to see. Written raw, the same bytes retitle the window — the case
// that shows this test can tell.
func TestOutputOnARealTerminal(t *testing.T) {
	const output = "\x1b]2;TITLE\x07\x1b[8mhidden\n"
	for _, raw := range []bool{false, true} {
		t.Run(fmt.Sprintf("raw=%v", raw), func(t *testing.T) {
			s, _ := startScreen(t, screenCase{Output: output, Raw: raw, OutputOnly: true})
			var rows []string
			proctest.WaitFor(t, 10*time.Second, "the output on the screen", func() bool {
				rows = s.rows()
				return len(rows) > 0 && strings.HasSuffix(rows[0], "hidden")
			})
			title := strings.TrimSpace(s.tmux("display-message", "-p", "-t", "prompt", "#{pane_title}"))
			if raw {
				if attrs := s.tmux("capture-pane", "-p", "-e", "-t", "prompt"); title != "TITLE" || !strings.Contains(attrs, "\x1b[8mhidden") {
					t.Fatalf("raw output: title %q, screen %q: the terminal did not act on it", title, attrs)
				}
				return
			}
			if title == "TITLE" {
				t.Fatal("the escaped output retitled the terminal")
			}
			if rows[0] != `\x1b]2;TITLE\x07\x1b[8mhidden` {
				t.Fatalf("the screen shows %q", rows)
			}
		})
	}
}
