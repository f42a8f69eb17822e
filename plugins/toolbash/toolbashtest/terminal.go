package toolbashtest

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/shell"
)

// terminals reports whether the target's executor runs terminals (and so the bash tool
// offers tty).
func terminals(t *testing.T, target Target) bool {
	t.Helper()
	ex, _, _ := target.Executor(t, nil)
	ts, ok := ex.(shell.Terminals)
	return ok && ts.Terminals()
}

// waitingRE is the result of a foreground tty call handed over while it waits for input.
var waitingRE = regexp.MustCompile(`^(?s)(.*)\[waiting for input: continuing as background job (bash-\d+); answer with job_write, read with job_output\]$`)

// What the model sees of a command under a terminal: its output as text (colours and
// cursor movements removed, "\r" rewrites resolved, stdout and stderr together); a
// prompt handed over as a job within 2 s, answered with job_write; a REPL driven and
// ended with ^D; ^C ending a tty job by SIGINT; job_write refused to a job without a
// terminal and to a finished one.
func terminal(t *testing.T, target Target) {
	if !terminals(t, target) {
		t.Skip("the executor runs no terminals")
	}
	c := compose(t, target, nil)
	tty := map[string]any{"tty": true}
	for _, r := range []struct{ command, text string }{
		{"echo out; echo err >&2", "out\nerr\n"},
		{`printf '\033[1;31mred\033[0m plain\n'`, "red plain\n"},
		{`printf 'progress 10%%\rprogress 55%%\rprogress 100%%\n'; printf 'done'`, "progress 100%\ndone"},
		{"echo $TERM; exit 3", "xterm-256color\n[exit code: 3]"},
	} {
		if res := c.bash(r.command, tty); res.Text != r.text || res.IsError {
			t.Errorf("tty %s:\n got %q\nwant %q", r.command, res.Text, r.text)
		}
	}
	// ls colours a directory (escape sequences) and lays out its columns.
	if res := c.bash("mkdir -p lsdir/sub && touch lsdir/f && ls --color=always lsdir", tty); res.Text != "f  sub\n" {
		t.Errorf("ls --color=always: %q", res.Text)
	}

	// A prompt: handed over within 2 s, answered.
	start := time.Now()
	res := c.bash(`read -p "Name: " n; echo "hi $n"`, tty)
	m := waitingRE.FindStringSubmatch(res.Text)
	if m == nil || m[1] != "Name: \n" || res.IsError {
		t.Fatalf("a prompt under a terminal: %q", res.Text)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the waiting marker came after %s", took)
	}
	id := m[2]
	if v, ok := res.Value.(toolbash.BackgroundValue); !ok || v.JobID != id || v.HandOver != "input" {
		t.Errorf("typed value %#v", res.Value)
	}
	out := c.call("job_write", map[string]any{"job_id": id, "input": "Ada\n", "wait_ms": 20000})
	if out.Text != "Ada\nhi Ada\n[status: completed, exit code: 0]" || out.IsError {
		t.Errorf("the answer: %q", out.Text)
	}
	if out := c.call("job_write", map[string]any{"job_id": id, "input": "more\n"}); out.Text != "Error: job "+id+" has finished and takes no more input [status: completed, exit code: 0]" {
		t.Errorf("job_write to a finished job: %q", out.Text)
	}

	// A REPL, line by line, ended with ^D.
	res = c.bash(`while read -r -p "> " l; do echo "= $l"; done; echo bye`, tty)
	if m = waitingRE.FindStringSubmatch(res.Text); m == nil || m[1] != "> \n" {
		t.Fatalf("a REPL: %q", res.Text)
	}
	id = m[2]
	if out := c.call("job_write", map[string]any{"job_id": id, "input": "1+1\n"}); out.Text != "1+1\n= 1+1\n> \n[status: running]" {
		t.Errorf("a REPL's answer: %q", out.Text)
	}
	if out := c.call("job_write", map[string]any{"job_id": id, "input": "\u0004", "wait_ms": 20000}); out.Text != "bye\n[status: completed, exit code: 0]" {
		t.Errorf("^D to a REPL: %q", out.Text)
	}

	// ^C to a tty job started in the background.
	id = c.startJob("echo ready; sleep 100", tty)
	if !proctest.Until(20*time.Second, func() bool {
		return strings.HasPrefix(c.call("job_output", map[string]any{"job_id": id}).Text, "ready\n")
	}) {
		t.Fatal("the tty job never printed ready")
	}
	if out := c.call("job_write", map[string]any{"job_id": id, "input": "\u0003", "wait_ms": 20000}); !strings.HasSuffix(out.Text, "[status: killed, signal: SIGINT]") {
		t.Errorf("^C to a tty job: %q", out.Text)
	}

	// A job without a terminal takes no input.
	id = c.startJob("sleep 100", nil)
	if out := c.call("job_write", map[string]any{"job_id": id, "input": "x"}); out.Text != "Error: job "+id+" does not take input (start it with tty: true)" || !out.IsError {
		t.Errorf("job_write to a job without a terminal: %q", out.Text)
	}
	c.call("job_kill", map[string]any{"job_id": id})
	c.call("job_output", map[string]any{"job_id": id, "wait": true})
}

// onTimeout: background: a command still running at its timeout is handed over as a
// job, and the job's output continues where the call's ended — every line once.
func timeoutHandOver(t *testing.T, target Target) {
	c := composeWith(t, target, nil, map[string]any{"onTimeout": "background"})
	res := c.bash(`for i in $(seq 5); do echo $i; sleep 1; done`, map[string]any{"timeoutMs": 1500})
	re := regexp.MustCompile(`^(?s)(.*)\[still running after 1500ms: continuing as background job (bash-\d+); read it with job_output, stop it with job_kill\]$`)
	m := re.FindStringSubmatch(res.Text)
	if m == nil || (m[1] != "1\n2\n" && m[1] != "1\n") || res.IsError {
		t.Fatalf("a command at its timeout: %q", res.Text)
	}
	if v, ok := res.Value.(toolbash.BackgroundValue); !ok || v.JobID != m[2] || v.HandOver != "timeout" {
		t.Errorf("typed value %#v", res.Value)
	}
	out := c.call("job_output", map[string]any{"job_id": m[2], "wait": true, "timeout_ms": 20000})
	rest, ok := strings.CutSuffix(out.Text, "[status: completed, exit code: 0]")
	if !ok || m[1]+rest != "1\n2\n3\n4\n5\n" {
		t.Errorf("the call showed %q, the job %q: want every line once", m[1], out.Text)
	}
	// A command that ends in time renders as always.
	if res := c.bash("echo quick", map[string]any{"timeoutMs": 5000}); res.Text != "quick\n" {
		t.Errorf("a quick command: %q", res.Text)
	}
}
