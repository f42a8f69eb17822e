package rules_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/approval"
	bashlocal "github.com/dsh-dev/dsh/plugins/bashlocal"
	"github.com/dsh-dev/dsh/plugins/prompt"
	"github.com/dsh-dev/dsh/plugins/rules"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/plugins/tools"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// stack is a real composition: the bash tool over bash-local, the approval service,
// and (with a config) a rules row.
type stack struct {
	rt    *container.Runtime
	tools *tools.Registry
	dir   string // bash-local's cwd: where markers go
}

func newStack(t testing.TB, rulesConfig map[string]any) *stack {
	t.Helper()
	cat, err := container.NewCatalog(tools.Plugin, prompt.Plugin, subprocess.Plugin, shellenv.Plugin,
		bashlocal.Plugin, toolbash.Plugin, approval.Plugin, rules.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{rt: container.NewRuntime(cat, container.Options{Logger: quiet}), dir: t.TempDir()}
	t.Cleanup(s.rt.Close)
	rows := []container.Row{
		{ID: "tools", Plugin: "tools"},
		{ID: "prompt", Plugin: "prompt"},
		{ID: "subprocess", Plugin: "subprocess"},
		{ID: "shell-env", Plugin: "shell-env", Config: map[string]any{"dshHome": t.TempDir()}},
		{ID: "bash", Plugin: "bash-local", Config: map[string]any{"cwd": s.dir}},
		{ID: "tool-bash", Plugin: "tool-bash"},
		{ID: "approval", Plugin: "approval"},
	}
	if rulesConfig != nil {
		rows = append(rows, container.Row{ID: "rules", Plugin: "rules", Config: rulesConfig, Source: filepath.Join(s.dir, "profile.yaml")})
	}
	if err := s.rt.Compose("test", rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range s.rt.Status().Rows {
		if r.State != container.StateActive {
			t.Fatalf("row %s is %s: %s", r.ID, r.State, r.Error)
		}
	}
	s.tools, _ = container.Lookup(s.rt, tools.Service)
	return s
}

func (s *stack) bash(t testing.TB, session *container.Session, command string) tools.Result {
	t.Helper()
	args, _ := json.Marshal(map[string]any{"command": command, "description": "test"})
	return s.tools.Call(context.Background(), "bash", args, session)
}

func (s *stack) marker(name string) (string, func() bool) {
	path := filepath.Join(s.dir, name)
	return path, func() bool { _, err := os.Stat(path); return err == nil }
}

// A deny runs nothing — not even the allowed commands before it in the same string —
// and says which rule denied it and why.
func TestPluginDenyRunsNothing(t *testing.T) {
	s := newStack(t, map[string]any{"rules": []any{
		map[string]any{"id": "no-touch", "deny": "touch *", "reason": "markers are forbidden"},
	}})
	path, exists := s.marker("denied")
	for _, cmd := range []string{
		"touch " + path,
		"echo first > " + path + ".first && touch " + path,
		"bash -c 'touch " + path + "'",
		"(cd / && \\touch " + path + ")",
	} {
		res := s.bash(t, nil, cmd)
		if res.Text != `Error: command denied by policy: rule "no-touch" (markers are forbidden)` || !res.IsError {
			t.Errorf("%s: %q", cmd, res.Text)
		}
	}
	if exists() {
		t.Fatal("a denied command ran")
	}
	if _, err := os.Stat(path + ".first"); err == nil {
		t.Fatal("the allowed part of a denied command ran")
	}
	if res := s.bash(t, nil, "echo allowed"); res.Text != "allowed\n" {
		t.Fatalf("allowed command: %q", res.Text)
	}
	if d := statusDetail(t, s.rt, "rules"); d != "1 rules, default allow" {
		t.Fatalf("detail %q", d)
	}
}

// sessionPrompter answers every question the same, counting them.
type sessionPrompter struct {
	answer container.Answer
	mu     sync.Mutex
	asked  []string
}

func (p *sessionPrompter) Confirm(ctx context.Context, m string) (container.Answer, error) {
	return p.ConfirmForSession(ctx, "once-or-not: "+m)
}

func (p *sessionPrompter) ConfirmForSession(_ context.Context, m string) (container.Answer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, m)
	return p.answer, nil
}

func (p *sessionPrompter) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.asked)
}

// An ask allowed once runs once and asks again; allowed for the session, it is not
// asked again in that session, but is in another one, and after the session ended.
func TestPluginAskOnceAndForSession(t *testing.T) {
	s := newStack(t, map[string]any{"default": "deny", "rules": []any{
		map[string]any{"id": "touching", "ask": "touch *", "reason": "creates files"},
		map[string]any{"allow": "echo *"},
	}})
	path, exists := s.marker("asked")

	once := &sessionPrompter{answer: container.Accepted}
	a := &container.Session{ID: "a", Prompter: once}
	for i := range 2 {
		if res := s.bash(t, a, "touch "+path+" && echo made"); res.Text != "made\n" {
			t.Fatalf("call %d: %q", i, res.Text)
		}
	}
	if once.count() != 2 || !exists() {
		t.Fatalf("allowed once: asked %d times (want 2), marker %v", once.count(), exists())
	}
	q := once.asked[0]
	for _, part := range []string{"Command:\n  touch " + path + " && echo made\n", `Policy: rule "touching" (creates files)`, "for the rest of this session"} {
		if !strings.Contains(q, part) {
			t.Errorf("question lacks %q:\n%s", part, q)
		}
	}

	session := &sessionPrompter{answer: container.AcceptedForSession}
	b := &container.Session{ID: "b", Prompter: session}
	for i := range 3 {
		if res := s.bash(t, b, "touch "+path+"."+string(rune('0'+i))); res.IsError {
			t.Fatalf("call %d: %q", i, res.Text)
		}
	}
	if session.count() != 1 {
		t.Fatalf("allowed for the session: asked %d times, want 1", session.count())
	}
	// What the session allowed is the rule, not every command: the default still denies.
	if res := s.bash(t, b, "rm "+path); res.Text != `Error: command denied by policy: default for "rm `+path+`"` {
		t.Fatalf("unrelated command: %q", res.Text)
	}
	other := &sessionPrompter{answer: container.Declined}
	if res := s.bash(t, &container.Session{ID: "c", Prompter: other}, "touch "+path+".c"); res.Text != `Error: the user did not allow this command (rule "touching")` || other.count() != 1 {
		t.Fatalf("another session: %q, asked %d", res.Text, other.count())
	}
	if _, err := os.Stat(path + ".c"); err == nil {
		t.Fatal("a declined command ran")
	}
	s.rt.EndSession("b")
	if res := s.bash(t, b, "touch "+path+".again"); res.IsError || session.count() != 2 {
		t.Fatalf("after the session ended: %q, asked %d (want 2)", res.Text, session.count())
	}
}

// A bad pattern refuses the whole profile (bash never runs unjudged), naming the row,
// the rule's index and the pattern; relative imports are read next to the profile file.
func TestPluginConfig(t *testing.T) {
	cat, err := container.NewCatalog(tools.Plugin, rules.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{Logger: quiet})
	defer rt.Close()
	err = rt.Compose("p", []container.Row{{ID: "tools", Plugin: "tools"}, {ID: "policy", Plugin: "rules", Source: "/p/profile.yaml",
		Config: map[string]any{"rules": []any{map[string]any{"allow": "ls"}, map[string]any{"id": "push", "ask": "git push $REMOTE"}}}}})
	want := `/p/profile.yaml: row "policy": rules: rules[1] ("push"): pattern "git push $REMOTE": word 3 ($REMOTE): is not literal`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %v\nwant   %s…", err, want)
	}
	if len(rt.Status().Rows) != 0 {
		t.Fatal("a profile with a bad rule was composed")
	}

	testdata, _ := filepath.Abs("testdata")
	cfg, err := cat.DecodeConfig(container.Row{ID: "policy", Plugin: "rules", Source: filepath.Join(testdata, "profile.yaml"),
		Config: map[string]any{"default": "ask", "claudeSettings": []any{"claude-settings.json"}, "codexRules": []any{"codex-good.rules"}}})
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.(*rules.Config).Policy()
	if j := p.Judge("npm run test"); j.Decision != rules.Allow || j.Source != `rule "Bash(npm run test:*)"` {
		t.Fatalf("imported rule: %s %s", j.Decision, j.Source)
	}
	if got := rules.Summary(p, cfg.(*rules.Config)); got != fmt.Sprintf("%d rules, default ask; imports claude-settings.json, codex-good.rules; import warnings: 2", p.Len()) || p.Len() < 10 {
		t.Fatalf("summary %q", got)
	}
	_, err = cat.DecodeConfig(container.Row{ID: "policy", Plugin: "rules", Source: filepath.Join(testdata, "profile.yaml"),
		Config: map[string]any{"codexRules": []any{"codex-bad-match.rules"}}})
	if err == nil || !strings.HasSuffix(err.Error(), `row "policy": rules: codex-bad-match.rules: prefix_rule example "git pull origin" does not match its pattern`) {
		t.Fatalf("bad import: %v", err)
	}
}

func statusDetail(t *testing.T, rt *container.Runtime, id string) string {
	t.Helper()
	for _, r := range rt.Status().Rows {
		if r.ID == id {
			return r.Detail
		}
	}
	t.Fatalf("no row %s", id)
	return ""
}

// A gate's answers are the policy's, whether its recent outcomes hold the command or
// not (more commands than it keeps, and commands too long to keep).
func TestCheckMatchesJudge(t *testing.T) {
	p, err := rules.Compile(rules.Config{Default: "ask", Rules: []rules.Rule{{Allow: "echo *"}, {ID: "rm", Deny: "rm *"}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	mem := rules.NewMemory()
	session := &container.Session{ID: "s"}
	want := map[rules.Decision]tools.Decision{rules.Allow: tools.Allow, rules.Ask: tools.Ask, rules.Deny: tools.Deny}
	commands := []string{"echo " + strings.Repeat("x", 2000), "rm " + strings.Repeat("y", 2000)}
	for i := range 600 {
		commands = append(commands, fmt.Sprintf("echo %d", i), fmt.Sprintf("rm %d", i), fmt.Sprintf("make %d", i))
	}
	for round := range 2 {
		for _, c := range commands {
			j := p.Judge(c)
			v := mem.Check(p, tools.Call{Args: map[string]any{"command": c}, Session: session}, "")
			if v.Decision != want[j.Decision] || v.Source != j.Source || v.Reason != j.Reason || (v.Decision == tools.Ask) != (v.Remember != nil) {
				t.Fatalf("round %d, %q: gate %+v, judgement %s %s", round, c, v, j.Decision, j.Source)
			}
		}
	}
}
