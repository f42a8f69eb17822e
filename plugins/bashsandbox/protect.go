package bashsandbox

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// protectedPaths lists the protected paths of a call whose writable roots are
// writable (the workspace first, "" for none), whether they exist or not: .dsh at the
// workspace root; .git at each writable root, and the git directory it names when it is
// a file (and that directory's commondir); the user's startup and credential files when
// a writable root holds the home directory; every file of the running profile (the path
// read and, for a symlink, its target); and the dsh homes (homes).
func protectedPaths(writable, profileFiles []string, dshEnv map[string]string) []string {
	var out []string
	add := func(p string) {
		if p == "" || !filepath.IsAbs(p) {
			return
		}
		p = filepath.Clean(p)
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for i, root := range writable {
		if root == "" {
			continue
		}
		if i == 0 {
			add(filepath.Join(root, ".dsh"))
		}
		dotGit := filepath.Join(root, ".git")
		add(dotGit)
		for _, dir := range gitDirs(dotGit) {
			add(dir)
		}
	}
	for _, f := range homeFiles(writable) {
		add(f)
	}
	for _, f := range profileFiles {
		add(f)
		if real, err := filepath.EvalSymlinks(f); err == nil {
			add(real)
		}
	}
	for _, h := range homes(dshEnv) {
		add(h)
	}
	return out
}

// gitDirs are the directories git uses for the repository whose .git is dotGit,
// besides dotGit itself: when it is a file ("gitdir: <dir>", the bare-repository and
// worktree layouts), the directory it names, relative to dotGit's directory; and the
// common directory a git directory's commondir file names, relative to it (a linked
// worktree's: the main repository's).
func gitDirs(dotGit string) []string {
	var out []string
	gitDir := dotGit
	if fi, err := os.Lstat(dotGit); err != nil {
		return nil
	} else if fi.Mode().IsRegular() {
		dir, ok := strings.CutPrefix(firstLine(dotGit), "gitdir: ")
		if !ok || dir == "" {
			return nil
		}
		gitDir = relativeTo(filepath.Dir(dotGit), dir)
		out = append(out, gitDir)
	}
	if common := firstLine(filepath.Join(gitDir, "commondir")); common != "" {
		out = append(out, relativeTo(gitDir, common))
	}
	return out
}

// firstLine is the first line of the regular file path, trimmed as git trims it; ""
// when there is none (or it is not a regular file).
func firstLine(path string) string {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	b := make([]byte, 4096)
	n, _ := io.ReadFull(f, b)
	line, _, _ := strings.Cut(string(b[:n]), "\n")
	return strings.TrimRight(line, " \t\r")
}

// relativeTo resolves path against dir unless it is absolute.
func relativeTo(dir, path string) string {
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	return filepath.Join(dir, path)
}

// homeStartupFiles are the startup and credential files of a home directory that a
// confined command must not change: what the user's next shell, git, ssh, package
// manager or cloud tool reads and runs.
var homeStartupFiles = []string{
	".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
	".zshrc", ".zshenv", ".zprofile", ".zlogin", ".config/fish",
	".gitconfig", ".config/git", ".ssh", ".gnupg", ".netrc", ".npmrc", ".pypirc",
	".docker", ".kube", ".aws", ".config/gh",
}

// homeFiles are the user's startup and credential files (homeStartupFiles) when one of
// the writable roots holds the home directory ($HOME); nil otherwise.
func homeFiles(writable []string) []string {
	home, err := os.UserHomeDir()
	if err != nil || !filepath.IsAbs(home) {
		return nil
	}
	home = filepath.Clean(home)
	if canon, err := filepath.EvalSymlinks(home); err == nil {
		home = canon
	}
	if !slices.ContainsFunc(writable, func(r string) bool { return r != "" && within(home, r) }) {
		return nil
	}
	out := make([]string, len(homeStartupFiles))
	for i, f := range homeStartupFiles {
		out[i] = filepath.Join(home, f)
	}
	return out
}

// homes are the dsh homes a call may use: the call's $DSH_HOME (shell-env's), and this
// process's ($DSH_HOME, else ~/.dsh).
func homes(dshEnv map[string]string) []string {
	out := []string{dshEnv["DSH_HOME"]}
	if h := os.Getenv("DSH_HOME"); h != "" {
		out = append(out, h)
	} else if home, err := os.UserHomeDir(); err == nil {
		out = append(out, filepath.Join(home, ".dsh"))
	}
	return out
}

// UnprotectableError refuses a configuration, or a workspace-write call, that would put
// a protected path inside a writable root on a backend that cannot keep it read-only
// (Landlock alone cannot make part of a writable directory read-only).
type UnprotectableError struct {
	Path, Root string
}

func (e *UnprotectableError) Error() string {
	return fmt.Sprintf("bash-sandbox: cannot protect %q inside the writable root %q: this host's sandbox is Landlock-only (no mount namespace), which cannot make part of a writable root read-only; refusing to run workspace-write commands while it is there", e.Path, e.Root)
}

// unprotectable returns an *UnprotectableError for the first existing protected path
// inside one of roots.
func unprotectable(protected, roots []string) error {
	for _, p := range protected {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		for _, r := range roots {
			if r != "" && within(p, r) {
				return &UnprotectableError{Path: p, Root: r}
			}
		}
	}
	return nil
}

// redirectable refuses a protected path inside a writable root that a command could
// redirect, which a read-only bind cannot protect: a symbolic link, or a path reached
// through one (a command could point it elsewhere).
func redirectable(protected, writable []string) error {
	for _, p := range protected {
		for _, r := range writable {
			if !within(p, r) {
				continue
			}
			if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
				return fmt.Errorf("bash-sandbox: cannot protect %q inside the writable root %q: it is a symbolic link", p, r)
			}
			if link := symlinkBelow(r, p); link != "" {
				return fmt.Errorf("bash-sandbox: cannot protect %q inside the writable root %q: it is reached through the symbolic link %q", p, r, link)
			}
		}
	}
	return nil
}
