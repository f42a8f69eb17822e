package toolbash_test

// The bash tool over the real bash-sandbox executor (Landlock through the launcher):
// denial rendering with the escalation hint in the foreground and in a background job,
// and an escalation approved by the real approval service. (bash-sandbox's own tests
// cover every acceptance item of the sandbox through this tool in depth.)

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/approval"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
	"github.com/dsh-dev/dsh/plugins/jobs"
	"github.com/dsh-dev/dsh/plugins/prompt"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// This test binary re-executes itself as the sandbox launcher.
func init() { bashsandbox.MaybeRunLauncher() }

func TestSandboxRealExecutor(t *testing.T) {
	t.Setenv("LC_ALL", "C") // the assertions read English messages
	if r := bashsandbox.Probe(); !r.Usable {
		t.Skipf("no usable sandbox backend here: %s", r.Reason)
	}
	cat, err := container.NewCatalog(tools.Plugin, prompt.Plugin, subprocess.Plugin, shellenv.Plugin, jobs.Plugin,
		bashsandbox.Plugin, toolbash.Plugin, approval.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(cat, container.Options{Logger: quietLogger()})
	t.Cleanup(func() { rt.Close(); assertNoChildren(t) })
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Compose("sandbox", []container.Row{
		{ID: "tools", Plugin: "tools"},
		{ID: "prompt", Plugin: "prompt"},
		{ID: "subprocess", Plugin: "subprocess"},
		{ID: "shell-env", Plugin: "shell-env", Config: map[string]any{"dshHome": t.TempDir()}},
		{ID: "jobs", Plugin: "jobs"},
		{ID: "bash", Plugin: "bash-sandbox", Config: map[string]any{"cwd": ws, "graceMs": 500}},
		{ID: "tool-bash", Plugin: "tool-bash"},
		{ID: "approval", Plugin: "approval", Config: map[string]any{"policy": "allow"}},
	}); err != nil {
		t.Fatal(err)
	}
	v, _ := container.Lookup(rt, tools.Service)
	reg := v
	call := func(s *container.Session, tool string, args map[string]any) tools.Result {
		return reg.CallMap(context.Background(), tool, args, s)
	}
	s := &container.Session{ID: "s", Cwd: ws}
	target := filepath.Join(ws, "x")
	denied := "[stderr]\ntouch: cannot touch '" + target + "': Permission denied\n" +
		toolbash.DeniedMarker("read-only") + "\n" + toolbash.EscalationHint

	res := call(s, "bash", map[string]any{"command": "touch " + target, "description": "Create a file"})
	expect(t, res, denied+"\n[exit code: 1]", false)
	if sb := res.Value.(toolbash.ForegroundValue).Sandbox; sb == nil || !sb.Denied || sb.Mode != "read-only" || sb.RunnerFailed {
		t.Fatalf("sandbox value %+v", sb)
	}

	res = call(s, "bash", map[string]any{"command": "touch " + target, "description": "Create a file", "run_in_background": true})
	expect(t, res, "started background job bash-1", false)
	expect(t, call(s, "job_output", map[string]any{"job_id": "bash-1", "wait": true, "timeout_ms": 10000}),
		denied+"\n[status: completed, exit code: 1]", false)

	res = call(s, "bash", map[string]any{"command": "touch " + target, "description": "Create a file",
		"sandbox_permissions": "workspace-write", "justification": "the test needs the file"})
	expect(t, res, "(no output)", false)
	if sb := res.Value.(toolbash.ForegroundValue).Sandbox; sb == nil || sb.Mode != "workspace-write" || sb.Denied {
		t.Fatalf("escalated sandbox value %+v", sb)
	}
	if _, err := os.Stat(target); err != nil {
		t.Fatalf("the approved escalation did not write: %v", err)
	}
	// Only that call: the next one is read-only again.
	res = call(s, "bash", map[string]any{"command": "echo $$ > " + target, "description": "Write a file"})
	if !strings.HasSuffix(res.Text, toolbash.DeniedMarker("read-only")+"\n"+toolbash.EscalationHint+"\n[exit code: 1]") {
		t.Fatalf("after the escalation: %q", res.Text)
	}
	if b, _ := os.ReadFile(target); len(b) != 0 {
		t.Fatalf("the escalation outlived its call: the file holds %q", b)
	}
}
