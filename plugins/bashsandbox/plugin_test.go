package bashsandbox_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
	"github.com/dsh-dev/dsh/plugins/prompt"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/shell"
	"github.com/dsh-dev/dsh/shell/bashexec"
)

func TestPluginDeclaration(t *testing.T) {
	p := bashsandbox.Plugin
	if p.Name != "bash-sandbox" || !slices.Equal(p.Aliases, []string{"@deepseek-ai/dsh-bash-sandbox"}) ||
		!slices.Equal(p.Inject, container.Keys{subprocess.Service, prompt.Service}) || !slices.Equal(p.Provide, container.Keys{shell.Service, shell.PolicyService}) {
		t.Fatalf("declaration: %+v", p)
	}
	cfg, ok := p.Config().(*bashsandbox.Config)
	if !ok {
		t.Fatalf("config %T", p.Config())
	}
	want := bashsandbox.Config{Config: bashexec.DefaultConfig(), SandboxConfig: bashsandbox.SandboxConfig{DefaultMode: "read-only", Network: "deny", Namespaces: "auto"}}
	if !reflect.DeepEqual(*cfg, want) {
		t.Fatalf("defaults %+v, want %+v", *cfg, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

// Every bad value is refused before anything starts, with the key in the message.
func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		config map[string]any
		want   string
	}{
		{map[string]any{"timeoutMs": 0}, "bash-sandbox: timeoutMs must be a positive finite number"},
		{map[string]any{"maxTimeoutMs": -1}, "bash-sandbox: maxTimeoutMs must be a positive finite number"},
		{map[string]any{"maxOutputBytes": 0}, "bash-sandbox: maxOutputBytes must be a positive finite number"},
		{map[string]any{"maxSpillBytes": 0}, "bash-sandbox: maxSpillBytes must be a positive finite number"},
		{map[string]any{"graceMs": 0}, "bash-sandbox: graceMs must be a positive finite number"},
		{map[string]any{"graceMs": 2147483648}, "bash-sandbox: graceMs must be no greater than 2147483647"},
		{map[string]any{"defaultMode": "full"}, `bash-sandbox: defaultMode must be one of "read-only", "workspace-write" or "danger-full-access", got "full"`},
		{map[string]any{"network": "on"}, `bash-sandbox: network must be "deny" or "allow", got "on"`},
		{map[string]any{"workspaceRoot": "relative/dir"}, `bash-sandbox: workspaceRoot must be an absolute path, got "relative/dir"`},
		{map[string]any{"writableRoots": []any{"/abs", "rel"}}, `bash-sandbox: writableRoots[1] must be an absolute path, got "rel"`},
		{map[string]any{"namespaces": "on"}, `bash-sandbox: namespaces must be "auto" or "off", got "on"`},
		{map[string]any{"sandbox": true}, `config: unknown key "sandbox" (known keys: cwd, defaultMode, graceMs, limits, maxOutputBytes, maxSpillBytes, maxTimeoutMs, namespaces, network, timeoutMs, workspaceRoot, writableRoots)`},
	} {
		rt := container.NewRuntime(catalog(t), container.Options{Logger: quietLogger()})
		err := rt.Compose("bad", []container.Row{{ID: "bash", Plugin: "bash-sandbox", Config: tc.config}})
		rt.Close()
		var re *container.RowError
		if err == nil || !strings.HasSuffix(err.Error(), tc.want) || !errors.As(err, &re) || re.Row != "bash" {
			t.Errorf("config %v: err = %v, want …%q", tc.config, err, tc.want)
		}
	}
}

// A configured workspaceRoot that does not exist fails the row, naming the key.
func TestWorkspaceRootMustExist(t *testing.T) {
	gone := filepath.Join(canonTempDir(t), "gone")
	st := newStackRows(t, stackSetup{bashConfig: map[string]any{"workspaceRoot": gone}})
	for _, row := range st.rt.Status().Rows {
		if row.ID == "bash" {
			want := "bash-sandbox: workspaceRoot: lstat " + gone + ": no such file or directory"
			if row.State != container.StateFailed || row.Error != want {
				t.Fatalf("bash row %s: %q, want failed with %q", row.State, row.Error, want)
			}
			return
		}
	}
	t.Fatal("no bash row")
}

// Calls without a session run in the configured cwd and may modify the configured
// workspaceRoot (else the cwd); the executor reports its default mode; status shows
// the backend.
func TestSessionlessRootAndStatus(t *testing.T) {
	cwd := outsideTempDir(t, "dsh-sandbox-cwd-")
	root := outsideTempDir(t, "dsh-sandbox-root-")
	st := newStack(t, stackSetup{bashConfig: map[string]any{"cwd": cwd, "workspaceRoot": root, "defaultMode": "workspace-write"}})
	expect(t, st.bash(t, nil, "pwd && touch "+root+"/x"), cwd+"\n", false)
	expect(t, st.bash(t, nil, "touch "+cwd+"/y"), deniedText("touch: cannot touch '"+cwd+"/y': Read-only file system", "workspace-write"), false)
	if got, want := st.prompts.Compose(nil), bashPrompt+"\n\n"+jobsPrompt(st)+"\n\n"+bashsandbox.PolicyPrompt("workspace-write", root); got != want {
		t.Fatalf("prompt without a session:\n got %q\nwant %q", got, want)
	}
	v, _ := container.Lookup(st.rt, shell.Service)
	if m := v.SandboxMode(); m != "workspace-write" {
		t.Fatalf("SandboxMode = %q", m)
	}
	if _, ok := container.Lookup(st.rt, shell.PolicyService); !ok {
		t.Fatal("no sandboxPolicy service")
	}

	// Without workspaceRoot the cwd is the root.
	plain := newStack(t, stackSetup{bashConfig: map[string]any{"cwd": cwd, "defaultMode": "workspace-write"}})
	expect(t, plain.bash(t, nil, "touch "+cwd+"/y && echo ok"), "ok\n", false)
	for _, row := range plain.rt.Status().Rows {
		if row.ID != "bash" {
			continue
		}
		want := fmt.Sprintf("sandbox: user namespaces + Landlock ABI %d + seccomp, default mode workspace-write, network deny, enforcement %s",
			bashsandbox.KernelABI(), enforcement(bashsandbox.NetworkDeny)) + bashsandbox.DefaultLimitsDetail(true)
		if row.Detail != want {
			t.Fatalf("status detail %q, want %q", row.Detail, want)
		}
	}
}

// The sandbox:policy section, order 110, through the prompt registry of the
// composed stack: exact text per mode (the session's standing mode), after tool:bash
// (105) and tool:jobs (106); it goes away with the executor.
func TestPromptSectionThroughTheStack(t *testing.T) {
	st := newStack(t, stackSetup{})
	ws := workspace(t)
	link := filepath.Join(canonTempDir(t), "link")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"read-only":          `Current DSH file policy: read-only. Any available operation enforced by the DSH file sandbox may read files but may not modify them, including under the session workspace: "` + ws + `". Only pseudo-devices such as /dev/null are writable.`,
		"workspace-write":    `Current DSH file policy: workspace-write. Any available operation enforced by the DSH file sandbox may modify files under the session workspace: "` + ws + `". Some platform temporary areas may also be writable.`,
		"danger-full-access": `Current DSH file policy: danger-full-access. The DSH file sandbox enforces nothing: any available operation may modify files anywhere the harness user can, including under the session workspace: "` + ws + `".`,
	}
	for _, mode := range []string{"", "read-only", "workspace-write", "danger-full-access"} {
		s := &container.Session{ID: "p", Cwd: link, SandboxMode: mode}
		text := want[mode]
		if mode == "" {
			text = want["read-only"] // the default
		}
		if got := st.prompts.Compose(s); got != bashPrompt+"\n\n"+jobsPrompt(st)+"\n\n"+text {
			t.Errorf("mode %q: prompt\n%s", mode, got)
		}
	}
	var sec []string
	for _, s := range st.prompts.Sections() {
		sec = append(sec, fmt.Sprintf("%s/%d", s.Name, s.Order))
	}
	if got := strings.Join(sec, " "); got != "tool:bash/105 tool:jobs/106 sandbox:policy/110" {
		t.Fatalf("sections %s", got)
	}
	if err := st.rt.Compose("sandbox-test", stackRows(stackSetup{executor: "bash-local"}, st.root, st.home)); err != nil {
		t.Fatal(err)
	}
	if got := st.prompts.Compose(session("p", ws)); got != bashPrompt+"\n\n"+jobsPrompt(st) {
		t.Fatalf("prompt under bash-local: %q", got)
	}
}
