package hooks_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/hooks"
)

// claudeSettingsJSON is a Claude Code settings file as teams write them: permissions
// (for the rules plugin), PreToolUse and PostToolUse command hooks on Bash and other
// tools, hooks of other events.
const claudeSettingsJSON = `{
  "permissions": {"allow": ["Bash(npm test:*)"]},
  "hooks": {
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "$CLAUDE_PROJECT_DIR/.claude/hooks/guard.sh", "timeout": 5}]},
      {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "exit 2"}]}
    ],
    "PostToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "echo '{\"hookSpecificOutput\":{\"hookEventName\":\"PostToolUse\",\"additionalContext\":\"audited\"}}'"}]}
    ],
    "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "true"}]}],
    "Stop": [{"hooks": [{"type": "prompt", "prompt": "check"}]}]
  }
}`

// A Claude Code settings file's command hooks run: `Bash` is bash, the command sees
// CLAUDE_PROJECT_DIR, the relative path is the profile's directory's; other tools'
// hooks never match dsh's tools; other events are left out.
func TestClaudeSettingsImport(t *testing.T) {
	ws := t.TempDir()
	settings := filepath.Join(ws, ".claude", "settings.json")
	if err := os.MkdirAll(filepath.Dir(settings), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(settings, []byte(claudeSettingsJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, ".claude", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	script(t, filepath.Join(ws, ".claude", "hooks"), "guard.sh", "grep -q 'curl' && { echo 'no network tools' >&2; exit 2; }\nexit 0")
	hh := newHarnessIn(t, ws, map[string]any{"claudeSettings": []any{".claude/settings.json"}})
	s := hh.session(container.Accepted)
	if res := hh.call(s, "bash", "curl example.com"); res.Text != `Error: command denied by policy: hook "$CLAUDE_PROJECT_DIR/.claude/hooks/guard.sh" (no network tools)` {
		t.Fatalf("%q", res.Text)
	}
	if res := hh.call(s, "bash", "ls"); res.Text != "ran ls\n[hook \"echo '{\\\"hookSpecificOutput\\\":{\\\"hookEventName\\\":\\\"PostToolUse\\\",\\\"additionalContext\\\":\\\"audited\\\"}}'\": audited]" {
		t.Fatalf("%q", res.Text)
	}
	if res := hh.call(s, "job_list", "ls"); res.Text != "ran ls" {
		t.Fatalf("an Edit|Write hook ran for job_list: %q", res.Text)
	}
	var detail string
	for _, r := range hh.rt.Status().Rows {
		if r.ID == "hooks" {
			detail = r.Detail
		}
	}
	if detail != "2 PreToolUse hooks, 1 PostToolUse hook; imports .claude/settings.json; import warnings: 2" {
		t.Fatalf("detail %q", detail)
	}
}

// Configs that cannot work refuse the row, naming the hook.
func TestConfigErrors(t *testing.T) {
	cat, err := container.NewCatalog(hooks.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		config map[string]any
		want   string
	}{
		{pre(map[string]any{"command": " "}), "hooks: preToolUse[0]: command must be a non-empty string"},
		{pre(map[string]any{"id": "x", "command": "true", "matcher": "("}), `hooks: preToolUse[0] ("x"): matcher "(": error parsing regexp: missing closing ): ` + "`^(?:()$`"},
		{post(map[string]any{"command": "true", "onError": "ignore"}), `hooks: postToolUse[0]: onError must be "deny" or "pass", got "ignore"`},
		{pre(map[string]any{"command": "true", "timeoutMs": -5}), "hooks: preToolUse[0]: timeoutMs must be a positive integer, got -5"},
		{pre(map[string]any{"command": "true", "timeoutMs": "soon"}), `hooks: preToolUse[0].timeoutMs must be a positive integer, got the string "soon"`},
		{pre(map[string]any{"command": "true", "match": "bash"}), `config: unknown key "preToolUse[0].match" (known keys: command, id, matcher, onError, timeoutMs)`},
		{map[string]any{"claudeSettings": []any{"missing.json"}}, "hooks: missing.json: open " + filepath.Join(dir, "missing.json") + ": no such file or directory"},
	} {
		_, err := cat.DecodeConfig(container.Row{ID: "hooks", Plugin: "hooks", Config: c.config, Source: filepath.Join(dir, "dsh.yaml")})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config %v: %v, want %q", c.config, err, c.want)
		}
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"hooks": {"PreToolUse": [{"matcher": "[", "hooks": [{"type": "command", "command": "true"}]}]}}`), 0o644)
	_, err = cat.DecodeConfig(container.Row{ID: "hooks", Plugin: "hooks", Config: map[string]any{"claudeSettings": []any{bad}}})
	if err == nil || !strings.Contains(err.Error(), bad+`: hooks.PreToolUse[0].hooks[0]: matcher "[": error parsing regexp`) {
		t.Errorf("%v", err)
	}
}
