package toolbash_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/dsh-dev/dsh/plugins/jobs"
	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/proc"
	"github.com/dsh-dev/dsh/shell"
)

func out(text string) shell.StreamResult { return shell.StreamResult{Text: text} }

func TestRenderSpecTable(t *testing.T) {
	// The rendering table, from the results those commands produce.
	cases := []struct {
		name string
		res  shell.RunResult
		want string
	}{
		{"echo hello", shell.RunResult{ExitCode: intp(0), Stdout: out("hello\n")}, "hello\n"},
		{"true", shell.RunResult{ExitCode: intp(0)}, "(no output)"},
		{"echo out; echo err >&2", shell.RunResult{ExitCode: intp(0), Stdout: out("out\n"), Stderr: out("err\n")}, "out\n[stderr]\nerr\n"},
		{"echo failing; exit 3", shell.RunResult{ExitCode: intp(3), Stdout: out("failing\n")}, "failing\n[exit code: 3]"},
		{"sleep 60 (timeoutMs 100)", shell.RunResult{Signal: "SIGTERM", TimedOut: true, TimeoutMs: 100}, "(no output)\n[timed out after 100ms]\n[killed by signal: SIGTERM]"},
	}
	for _, tc := range cases {
		if got := toolbash.Render(tc.res, false); got != tc.want {
			t.Errorf("%s: Render = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestRenderMarkerCombinations(t *testing.T) {
	denied := &shell.SandboxFacts{Mode: "read-only", Denied: true, Enforcement: "full"}
	cases := []struct {
		name       string
		res        shell.RunResult
		escalation bool
		want       string
	}{
		{"truncated with a spill path",
			shell.RunResult{ExitCode: intp(0), Stdout: shell.StreamResult{Text: "tail\n", Truncated: true, SpillPath: "/spill/a"}},
			false, "tail\n\n[output truncated; full output: /spill/a]"},
		{"truncated without a complete spill file",
			shell.RunResult{ExitCode: intp(0), Stdout: shell.StreamResult{Text: "tail", Truncated: true}},
			false, "tail\n[output truncated; full output: (unavailable)]"},
		{"truncated stdout, then stderr, then exit",
			shell.RunResult{ExitCode: intp(2), Stdout: shell.StreamResult{Text: "x", Truncated: true, SpillPath: "/s"}, Stderr: out("bad\n")},
			false, "x\n[output truncated; full output: /s]\n[stderr]\nbad\n[exit code: 2]"},
		{"truncated stderr",
			shell.RunResult{ExitCode: intp(0), Stderr: shell.StreamResult{Text: "e", Truncated: true, SpillPath: "/s2"}},
			false, "[stderr]\ne\n[output truncated; full output: /s2]"},
		{"stderr only", shell.RunResult{ExitCode: intp(0), Stderr: out("warning\n")}, false, "[stderr]\nwarning\n"},
		{"stderr only, no newline, failing", shell.RunResult{ExitCode: intp(1), Stderr: out("nope")}, false, "[stderr]\nnope\n[exit code: 1]"},
		{"stdout without newline before stderr", shell.RunResult{ExitCode: intp(0), Stdout: out("a"), Stderr: out("b")}, false, "a\n[stderr]\nb"},
		{"exit marker after output without newline", shell.RunResult{ExitCode: intp(7), Stdout: out("partial")}, false, "partial\n[exit code: 7]"},
		{"timeout before signal", shell.RunResult{Signal: "SIGKILL", TimedOut: true, TimeoutMs: 2500, Stdout: out("tick\n")}, false, "tick\n[timed out after 2500ms]\n[killed by signal: SIGKILL]"},
		{"timeout with a clean exit (command trapped SIGTERM)", shell.RunResult{ExitCode: intp(0), TimedOut: true, TimeoutMs: 100}, false, "(no output)\n[timed out after 100ms]"},
		{"signal without timeout", shell.RunResult{Signal: "SIGTERM"}, false, "(no output)\n[killed by signal: SIGTERM]"},
		{"denial + hint + exit code, in order",
			shell.RunResult{ExitCode: intp(1), Stderr: out("touch: cannot touch 'x': Permission denied\n"), Sandbox: denied},
			true, "[stderr]\ntouch: cannot touch 'x': Permission denied\n[sandbox: file access denied under read-only mode]\n" + toolbash.EscalationHint + "\n[exit code: 1]"},
		{"denial without escalation",
			shell.RunResult{ExitCode: intp(1), Sandbox: denied}, false, "(no output)\n[sandbox: file access denied under read-only mode]\n[exit code: 1]"},
		{"runner failure is never a denial",
			shell.RunResult{ExitCode: intp(125), Stderr: out("dsh-sandbox: landlock: unsupported\n"), Sandbox: &shell.SandboxFacts{Mode: "workspace-write", RunnerFailed: true, Denied: true}},
			true, "[stderr]\ndsh-sandbox: landlock: unsupported\n[sandbox: the sandbox runner itself failed under workspace-write mode — the command did not run; this is a sandbox problem, not a command failure]\n[exit code: 125]"},
		{"confined success has no marker", shell.RunResult{ExitCode: intp(0), Stdout: out("ok\n"), Sandbox: &shell.SandboxFacts{Mode: "workspace-write"}}, true, "ok\n"},
	}
	for _, tc := range cases {
		if got := toolbash.Render(tc.res, tc.escalation); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
	if toolbash.EscalationHint != "[sandbox: escalation available — retry this exact command once with sandbox_permissions (the narrowest wider mode that suffices) + justification; the approval prompt asks the user]" {
		t.Fatal("escalation hint drifted from the contract")
	}
}

func TestRenderedMarkersParseBack(t *testing.T) {
	body, code, sig := shell.ParseExitStatus(toolbash.Render(shell.RunResult{ExitCode: intp(3), Stdout: out("failing\n")}, false))
	if body != "failing" || code == nil || *code != 3 || sig != "" {
		t.Fatalf("parse = %q %v %q", body, code, sig)
	}
	_, code, sig = shell.ParseExitStatus(toolbash.Render(shell.RunResult{Signal: "SIGTERM", TimedOut: true, TimeoutMs: 100}, false))
	if code != nil || sig != "SIGTERM" {
		t.Fatalf("signal parse = %v %q", code, sig)
	}
}

func TestValueJSON(t *testing.T) {
	cases := []struct {
		res  shell.RunResult
		want string
	}{
		{shell.RunResult{ExitCode: intp(3), TimeoutMs: 120000, Stdout: out("failing\n")},
			`{"kind":"foreground","exitCode":3,"signal":null,"timedOut":false,"aborted":false,"timeoutMs":120000,"stdout":{"text":"failing\n","truncated":false},"stderr":{"text":"","truncated":false}}`},
		{shell.RunResult{ExitCode: intp(143), Signal: "SIGTERM", TimedOut: true, TimeoutMs: 100},
			`{"kind":"foreground","exitCode":null,"signal":"SIGTERM","timedOut":true,"aborted":false,"timeoutMs":100,"stdout":{"text":"","truncated":false},"stderr":{"text":"","truncated":false}}`},
		{shell.RunResult{ExitCode: intp(1), TimeoutMs: 5, Stdout: shell.StreamResult{Text: "t", Truncated: true, SpillPath: "/p"},
			Sandbox: &shell.SandboxFacts{Mode: "read-only", Denied: true, Enforcement: "partial"}},
			`{"kind":"foreground","exitCode":1,"signal":null,"timedOut":false,"aborted":false,"timeoutMs":5,"stdout":{"text":"t","truncated":true,"spillPath":"/p"},"stderr":{"text":"","truncated":false},"sandbox":{"mode":"read-only","denied":true,"enforcement":"partial","runnerFailed":false}}`},
	}
	for _, tc := range cases {
		b, err := json.Marshal(toolbash.ValueOf(tc.res))
		if err != nil || string(b) != tc.want {
			t.Errorf("value = %s (%v)\nwant    %s", b, err, tc.want)
		}
	}
	b, _ := json.Marshal(toolbash.BackgroundValue{Kind: "background", JobID: "bash-1"})
	if string(b) != `{"kind":"background","jobId":"bash-1"}` {
		t.Fatalf("background value = %s", b)
	}
}

// A program decoding structured content reads "kind" first, then decodes into the
// matching exported type and gets back exactly what the tool produced.
func TestValuesDecodeByKind(t *testing.T) {
	fg := toolbash.ValueOf(shell.RunResult{ExitCode: intp(1), TimeoutMs: 5,
		Stdout: shell.StreamResult{Text: "t", Truncated: true, SpillPath: "/p"}, Stderr: out("e\n"),
		Sandbox: &shell.SandboxFacts{Mode: "read-only", Denied: true, Enforcement: "full"}})
	bg := toolbash.BackgroundValue{Kind: toolbash.KindBackground, JobID: "bash-7"}
	for _, v := range []any{fg, bg} {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var head struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			t.Fatal(err)
		}
		var got any
		switch head.Kind {
		case toolbash.KindForeground:
			var f toolbash.ForegroundValue
			err = json.Unmarshal(raw, &f)
			got = f
		case toolbash.KindBackground:
			var b toolbash.BackgroundValue
			err = json.Unmarshal(raw, &b)
			got = b
		default:
			t.Fatalf("kind %q in %s", head.Kind, raw)
		}
		if err != nil || !reflect.DeepEqual(got, v) {
			t.Fatalf("decoded %+v (%v), want %+v", got, err, v)
		}
	}
	if toolbash.KindForeground != "foreground" || toolbash.KindBackground != "background" {
		t.Fatal("kind constants drifted from the contract")
	}
}

func TestRenderReadAndOutcome(t *testing.T) {
	cases := []struct {
		r    shell.ProcessRead
		want string
	}{
		{shell.ProcessRead{Delta: "abc\n"}, "abc\n"},
		{shell.ProcessRead{Delta: "abc", Lossy: true, StdoutSpillPath: "/o", StderrSpillPath: "/e"}, "abc\n[some output was dropped from memory; full output: /o, /e]"},
		{shell.ProcessRead{Delta: "x\n", Lossy: true, StderrSpillPath: "/e"}, "x\n[some output was dropped from memory; full output: /e]"},
		{shell.ProcessRead{Lossy: true}, "[some output was dropped from memory; full output: (unavailable)]"},
	}
	for _, tc := range cases {
		if got := toolbash.RenderRead(tc.r); got != tc.want {
			t.Errorf("RenderRead(%+v) = %q, want %q", tc.r, got, tc.want)
		}
	}
	outcomes := []struct {
		st   proc.Exit
		want jobs.Outcome
	}{
		{proc.Exit{Signal: "SIGTERM", Reason: proc.ReasonKill}, jobs.Outcome{Status: jobs.StatusKilled, Detail: "signal: SIGTERM"}},
		{proc.Exit{Signal: "SIGKILL"}, jobs.Outcome{Status: jobs.StatusKilled, Detail: "signal: SIGKILL"}},
		{proc.Exit{Reason: proc.ReasonTimeout}, jobs.Outcome{Status: jobs.StatusKilled, Detail: "killed before exit"}},
		{proc.Exit{Err: errors.New("spawn failed")}, jobs.Outcome{Status: jobs.StatusKilled, Detail: "killed before exit"}},
		{proc.Exit{}, jobs.Outcome{Status: jobs.StatusFailed, Detail: "exit status unknown"}},
		{proc.Exit{Code: intp(0)}, jobs.Outcome{Status: jobs.StatusCompleted, Detail: "exit code: 0"}},
		{proc.Exit{Code: intp(4)}, jobs.Outcome{Status: jobs.StatusCompleted, Detail: "exit code: 4"}},
	}
	for _, tc := range outcomes {
		if got := toolbash.OutcomeOf(tc.st, true); got != tc.want {
			t.Errorf("OutcomeOf(%+v) = %+v, want %+v", tc.st, got, tc.want)
		}
	}
}

func TestPresenters(t *testing.T) {
	args := map[string]any{"command": "ls -la src", "description": "List the source directory", "workdir": "sub"}
	c := toolbash.PresentCall(args)
	if c.Card != "terminal" || c.Title != "ls -la src" || c.Description != "List the source directory" || c.Cwd != "sub" {
		t.Fatalf("call card = %+v", c)
	}
	r := toolbash.PresentResult(args, tools.Result{Text: "failing\n[exit code: 3]"})
	if r.Card != "terminal" || r.Output != "failing" || r.ExitCode == nil || *r.ExitCode != 3 || r.Signal != "" {
		t.Fatalf("result card = %+v", r)
	}
	r = toolbash.PresentResult(args, tools.Result{Text: "(no output)\n[timed out after 100ms]\n[killed by signal: SIGTERM]"})
	if r.Output != "(no output)\n[timed out after 100ms]" || r.ExitCode != nil || r.Signal != "SIGTERM" {
		t.Fatalf("signal card = %+v", r)
	}
	r = toolbash.PresentResult(args, tools.Result{Text: "hello\n"})
	if r.Output != "hello\n" || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("success card = %+v", r)
	}
	bg := map[string]any{"command": "npm run dev", "description": "Start the dev server", "run_in_background": true}
	if c := toolbash.PresentCall(bg); c.Card != "generic" || c.Kind != "execute" || c.RawInput != "npm run dev" || len(c.Content) != 1 || c.Content[0] != "Start the dev server" {
		t.Fatalf("background call card = %+v", c)
	}
	if r := toolbash.PresentResult(bg, tools.Result{Text: "started background job bash-1", Value: toolbash.BackgroundValue{Kind: "background", JobID: "bash-1"}}); r.Card != "generic" || r.Content[0] != "started background job bash-1" {
		t.Fatalf("background result card = %+v", r)
	}
	if r := toolbash.PresentResult(args, tools.Result{Text: "Error: tool call aborted", IsError: true}); r.Card != "generic" || r.ExitCode != nil {
		t.Fatalf("error card = %+v", r)
	}
	// Malformed (replayed) arguments never panic.
	if c := toolbash.PresentCall(map[string]any{"command": 5}); c.Card != "generic" {
		t.Fatalf("malformed call card = %+v", c)
	}
	if r := toolbash.PresentResult(nil, tools.Result{Text: "x", Value: map[string]any{"kind": "background"}}); r.Card != "generic" {
		t.Fatalf("replayed background card = %+v", r)
	}
}
