package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/internal/sshtest"
)

// The interactive commands end to end, through `dsh serve` and a real MCP client, on
// bash-local, bash-sandbox and (items a–c) bash-ssh against a real sshd.
func TestServeInteractiveCommands(t *testing.T) {
	for _, ex := range []struct {
		name   string
		remote bool
		args   func(t *testing.T, ws string) []string
	}{
		{"bash-local", false, func(t *testing.T, ws string) []string {
			return []string{"--workspace", ws, "--profile", ttyProfile(t, ws, "")}
		}},
		{"bash-sandbox", false, func(t *testing.T, ws string) []string {
			return []string{"--workspace", ws, "--profile", ttyProfile(t, ws, "  - id: bash\n    name: bash-sandbox\n    config: {defaultMode: workspace-write}\n")}
		}},
		{"bash-ssh", true, func(t *testing.T, ws string) []string {
			srv := sshtest.Start(t)
			return []string{"--profile", writeSSHProfile(t, srv, filepath.Join(ws, "ssh.yaml"), srv.KnownHostsFile, ws)}
		}},
	} {
		t.Run(ex.name, func(t *testing.T) {
			ws := t.TempDir()
			c := startServe(t, clientOptions{}, ex.args(t, ws)...)
			s := &ttySession{t: t, c: c}
			s.prompt()
			s.repl()
			s.interrupt()
			if !ex.remote {
				s.timeoutHandOver()
				s.plainText()
				s.refusals()
			}
			s.noneLeft()
		})
	}
}

// ttyProfile writes a profile extending default in ws: onTimeout background for the
// bash tool, a dsh home of the test's own, and more rows.
func ttyProfile(t *testing.T, ws, rows string) string {
	t.Helper()
	path := filepath.Join(ws, "tty.yaml")
	profile := fmt.Sprintf("extends: default\nplugins:\n  - id: shell-env\n    config: {dshHome: %q}\n  - id: tool-bash\n    config: {onTimeout: background}\n%s",
		filepath.Join(t.TempDir(), "home"), rows)
	if err := os.WriteFile(path, []byte(profile), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// ttySession is one client's session of interactive calls.
type ttySession struct {
	t *testing.T
	c *client
}

func (s *ttySession) bash(command string, extra map[string]any) (string, any) {
	s.t.Helper()
	args := map[string]any{"command": command, "description": "Run an interactive command"}
	for k, v := range extra {
		args[k] = v
	}
	text, _, value := s.c.call(s.t, "bash", args)
	return text, value
}

func (s *ttySession) tool(name string, args map[string]any) string {
	s.t.Helper()
	text, _, _ := s.c.call(s.t, name, args)
	return text
}

var waitingMarker = regexp.MustCompile(`^(?s)(.*)\n\[waiting for input: continuing as background job (bash-\d+); answer with job_write, read with job_output\]$`)

// handedOver runs a tty command that waits for input and returns the output it showed
// and its job id.
func (s *ttySession) handedOver(command string) (string, string) {
	s.t.Helper()
	start := time.Now()
	text, value := s.bash(command, map[string]any{"tty": true})
	m := waitingMarker.FindStringSubmatch(text)
	if m == nil {
		s.t.Fatalf("%s under a terminal: %q", command, text)
	}
	if took := time.Since(start); took > 2*time.Second && command == `read -p "Name: " n; echo "hi $n"` {
		s.t.Errorf("the waiting marker came after %s", took)
	}
	if v, _ := value.(map[string]any); v["kind"] != "background" || v["jobId"] != m[2] || v["handOver"] != "input" {
		s.t.Errorf("structured content %v", value)
	}
	return m[1], m[2]
}

// (a) A prompt is shown with the waiting marker; the answer completes the command.
func (s *ttySession) prompt() {
	shown, id := s.handedOver(`read -p "Name: " n; echo "hi $n"`)
	if shown != "Name: " {
		s.t.Errorf("the prompt: %q", shown)
	}
	if out := s.tool("job_write", map[string]any{"job_id": id, "input": "Ada\n", "wait_ms": 20000}); out != "Ada\nhi Ada\n[status: completed, exit code: 0]" {
		s.t.Errorf("the answer: %q", out)
	}
}

// (b) A Python REPL under a terminal: 1+1 answers 2; ^D ends it.
func (s *ttySession) repl() {
	shown, id := s.handedOver("python3 -i -q")
	if shown != ">>> " {
		s.t.Errorf("the REPL's prompt: %q", shown)
	}
	if out := s.tool("job_write", map[string]any{"job_id": id, "input": "1+1\n", "wait_ms": 20000}); !strings.Contains(out, "\n2\n") || !strings.HasSuffix(out, "[status: running]") {
		s.t.Errorf("1+1: %q", out)
	}
	out := s.tool("job_write", map[string]any{"job_id": id, "input": "\u0004", "wait_ms": 20000})
	if !strings.HasSuffix(out, "[status: completed, exit code: 0]") {
		out += s.tool("job_output", map[string]any{"job_id": id, "wait": true, "timeout_ms": 20000})
	}
	if !strings.HasSuffix(out, "[status: completed, exit code: 0]") {
		s.t.Errorf("^D: %q", out)
	}
}

// (c) ^C ends a tty job's sleep by SIGINT.
func (s *ttySession) interrupt() {
	text, _ := s.bash("sleep 100", map[string]any{"tty": true, "run_in_background": true})
	id, ok := strings.CutPrefix(text, "started background job ")
	if !ok {
		s.t.Fatalf("tty job: %q", text)
	}
	if out := s.tool("job_write", map[string]any{"job_id": id, "input": "\u0003", "wait_ms": 20000}); !strings.HasSuffix(out, "[status: killed, signal: SIGINT]") {
		s.t.Errorf("^C: %q", out)
	}
}

// (d) onTimeout background: the command continues as a job at its timeout; the call
// and the job show every line once.
func (s *ttySession) timeoutHandOver() {
	text, value := s.bash("for i in $(seq 5); do echo $i; sleep 1; done", map[string]any{"timeoutMs": 1500})
	m := regexp.MustCompile(`^(?s)(.*)\[still running after 1500ms: continuing as background job (bash-\d+); read it with job_output, stop it with job_kill\]$`).FindStringSubmatch(text)
	if m == nil || m[1] != "1\n2\n" && m[1] != "1\n" {
		s.t.Fatalf("at the timeout: %q", text)
	}
	if v, _ := value.(map[string]any); v["handOver"] != "timeout" {
		s.t.Errorf("structured content %v", value)
	}
	out := s.tool("job_output", map[string]any{"job_id": m[2], "wait": true, "timeout_ms": 20000})
	rest, ok := strings.CutSuffix(out, "[status: completed, exit code: 0]")
	if !ok || m[1]+rest != "1\n2\n3\n4\n5\n" {
		s.t.Errorf("the call showed %q and the job %q: want each line once", m[1], out)
	}
}

// (e) Colours, cursor moves and "\r" rewrites render as plain text.
func (s *ttySession) plainText() {
	tty := map[string]any{"tty": true}
	if text, _ := s.bash("mkdir -p lsdir/sub && touch lsdir/file && ls --color=always lsdir", tty); text != "file  sub\n" {
		s.t.Errorf("ls --color=always: %q", text)
	}
	if text, _ := s.bash(`for p in 0 25 50 75 100; do printf '\r\033[2K[%-10s] %3d%%' "$(printf '#%.0s' $(seq 0 $((p/10))))" $p; done; echo; echo done`, tty); text != "[###########] 100%\ndone\n" {
		s.t.Errorf("a progress bar: %q", text)
	}
}

// (f) job_write to a job without a terminal, and to a finished one.
func (s *ttySession) refusals() {
	text, _ := s.bash("sleep 100", map[string]any{"run_in_background": true})
	id := strings.TrimPrefix(text, "started background job ")
	if out := s.tool("job_write", map[string]any{"job_id": id, "input": "x"}); out != "Error: job "+id+" does not take input (start it with tty: true)" {
		s.t.Errorf("job_write to a job without a terminal: %q", out)
	}
	s.tool("job_kill", map[string]any{"job_id": id})
	text, _ = s.bash("echo once", map[string]any{"run_in_background": true, "tty": true})
	id = strings.TrimPrefix(text, "started background job ")
	s.tool("job_output", map[string]any{"job_id": id, "wait": true, "timeout_ms": 20000})
	if out := s.tool("job_write", map[string]any{"job_id": id, "input": "x"}); out != "Error: job "+id+" has finished and takes no more input [status: completed, exit code: 0]" {
		s.t.Errorf("job_write to a finished job: %q", out)
	}
}

// noneLeft checks that every job has finished and that nothing dsh started outlives
// it.
func (s *ttySession) noneLeft() {
	s.t.Helper()
	waitFor(s.t, 20*time.Second, "every job to finish", func() bool {
		return !strings.Contains(s.tool("job_list", map[string]any{}), " running — ")
	})
	tree := descendants(s.c.cmd.Process.Pid)
	s.c.Close()
	_ = s.c.cmd.Wait()
	if !proctest.Until(10*time.Second, func() bool { return proctest.AllGone(tree...) }) {
		s.t.Errorf("processes left behind: %s", proctest.Describe(tree))
	}
}

// descendants lists the live descendants of pid.
func descendants(pid int) []int {
	children := map[int][]int{}
	for _, p := range proctest.Processes() {
		children[p.Ppid] = append(children[p.Ppid], p.Pid)
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// A job handed over from a foreground call survives a hot reload of the executor row,
// keeps taking input, and is fenced from the other sessions of the server.
func TestServeHandedOverJobSurvivesReloadAndIsFenced(t *testing.T) {
	ws := t.TempDir()
	profile := filepath.Join(ws, "profile.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(profile+".tmp", []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(profile+".tmp", profile); err != nil {
			t.Fatal(err)
		}
	}
	write("extends: default\n")
	url := startHTTPServe(t, "--workspace", ws, "--token-file", writeTokens(t, testToken), "--profile", profile).url
	connect := func() *mcp.ClientSession {
		cl := mcp.NewClient(&mcp.Implementation{Name: "tty-e2e", Version: "1"}, nil)
		cs, err := cl.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: authClient(testToken)}, &mcp.ClientSessionOptions{ProtocolVersion: sessionRevision})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	call := func(cs *mcp.ClientSession, name string, args map[string]any) string {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	a, b := connect(), connect()
	text := call(a, "bash", map[string]any{"command": `read -p "Name: " n; echo "hi $n"`, "description": "Ask for a name", "tty": true})
	m := waitingMarker.FindStringSubmatch(text)
	if m == nil || m[1] != "Name: " {
		t.Fatalf("the prompt: %q", text)
	}
	id := m[2]

	// Reload the executor row (a new timeout), and wait until it took effect.
	write("extends: default\nplugins:\n  - id: bash\n    config:\n      timeoutMs: 300\n")
	waitFor(t, 20*time.Second, "the reloaded executor", func() bool {
		return call(a, "bash", map[string]any{"command": "sleep 5", "description": "Sleep past the timeout"}) == "(no output)\n[timed out after 300ms]\n[killed by signal: SIGTERM]"
	})

	for _, tool := range []string{"job_write", "job_output", "job_kill"} {
		if got := call(b, tool, map[string]any{"job_id": id, "input": "Eve\n"}); got != "Error: job "+id+" belongs to another session" {
			t.Errorf("%s from another session: %q", tool, got)
		}
	}
	if got := call(a, "job_write", map[string]any{"job_id": id, "input": "Ada\n", "wait_ms": 20000}); got != "Ada\nhi Ada\n[status: completed, exit code: 0]" {
		t.Errorf("the answer after the reload: %q", got)
	}
}
