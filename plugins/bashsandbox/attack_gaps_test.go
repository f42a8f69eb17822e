package bashsandbox_test

// Known gaps: attacks that get through today, each written as the test that will pass
// once the gap is closed, and skipped until then (docs/sandbox.md lists them under
// "Known gaps").

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/shell"
)

// hostGitStatus runs `git status` in dir as the user would, unconfined, and reports
// whether marker (what a planted core.fsmonitor touches) appeared.
func hostGitStatus(t *testing.T, dir, marker string) bool {
	t.Helper()
	cmd := exec.Command("git", "status", "--short")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	cmd.Run() // its result does not matter: whether it ran the planted command does
	return exists(marker)
}

// A workspace without .git at its root (not a repository yet, or a subdirectory of one):
// a command creates .git itself — a whole repository, with core.fsmonitor set — and the
// user's next git command there (a shell prompt runs one on every cd) runs it
// unconfined. .git cannot be made read-only before it exists without writing to the
// workspace.
func TestConfinedGapGitCreatedByACommand(t *testing.T) {
	t.Skip("known gap: a .git that does not exist when a command runs can be created by that command, with hooks or core.fsmonitor the user's next git runs unconfined")
	st := newStack(t, stackSetup{bashConfig: map[string]any{"defaultMode": shell.ModeWorkspaceWrite}})
	ws := workspace(t)
	marker := filepath.Join(outsideTempDir(t, "dsh-sandbox-gap-"), "pwned")
	st.bash(t, session("gap-git", ws), "git init -q && git config core.fsmonitor 'touch "+marker+"; false'")
	if hostGitStatus(t, ws, marker) {
		t.Fatal("the user's git ran a command the sandbox planted")
	}
}

// .git at the workspace root is protected, but git looks for a repository in the
// current directory first: a command makes a subdirectory a repository of its own (a
// .git there, or the subdirectory itself shaped as a bare repository) and the user's
// git in that subdirectory runs its core.fsmonitor unconfined.
func TestConfinedGapNestedRepository(t *testing.T) {
	t.Skip("known gap: only .git at the workspace root is protected; a repository planted in a subdirectory is honoured by the user's git there")
	st := newStack(t, stackSetup{bashConfig: map[string]any{"defaultMode": shell.ModeWorkspaceWrite}})
	ws := workspace(t)
	runGit(t, ws, "init", "-q")
	marker := filepath.Join(outsideTempDir(t, "dsh-sandbox-gap-"), "pwned")
	res := st.bash(t, session("gap-nested", ws), "mkdir sub && cd sub && git init -q && git config core.fsmonitor 'touch "+marker+"; false' && echo planted")
	if res.Text != "planted\n" {
		t.Fatalf("planting: %q", res.Text)
	}
	if hostGitStatus(t, filepath.Join(ws, "sub"), marker) {
		t.Fatal("the user's git ran a command the sandbox planted")
	}
}

// A protected path that appears while a command runs (the user runs `git init` in the
// workspace during a background job) is bound read-only when the next command starts;
// but a command that entered it before (its working directory, or a descriptor open on
// it) keeps writing there through the workspace's own mount.
func TestConfinedGapJobInsideAppearingProtectedPath(t *testing.T) {
	t.Skip("known gap: a running command that entered a protected path before it was bound read-only keeps writing there")
	st := newStack(t, stackSetup{bashConfig: map[string]any{"defaultMode": shell.ModeWorkspaceWrite}})
	ws := workspace(t)
	s := session("gap-job", ws)
	hook := filepath.Join(ws, ".git", "hooks", "pre-commit")
	entered := filepath.Join(ws, "entered")
	res := st.bash(t, s, "until [ -d .git/hooks ]; do sleep 0.01; done; cd .git/hooks && touch "+entered+
		" && until [ -e "+ws+"/go ]; do sleep 0.01; done; echo 'touch pwned' > pre-commit; echo done", "run_in_background", true)
	id := strings.TrimPrefix(res.Text, "started background job ")
	runGit(t, ws, "init", "-q")
	waitFor(t, "the job to enter .git/hooks", func() bool { return exists(entered) })
	// The next command binds .git read-only, then lets the job go on.
	expect(t, st.bash(t, s, "touch go && echo x > .git/hooks/direct"),
		deniedText("bash: line 1: .git/hooks/direct: Read-only file system", shell.ModeWorkspaceWrite), false)
	waitFor(t, "the job to finish", func() bool {
		return strings.Contains(st.call(t, s, "job_output", `{"job_id":"`+id+`"}`).Text, "[status: completed")
	})
	if exists(hook) {
		t.Fatal("a hook was planted in the protected .git")
	}
}
