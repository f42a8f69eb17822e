package bashsandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// protectedPaths lists the protected paths of a call in workspace ws, whether they exist
// or not: .git and .dsh at the workspace root, every file of the running profile (the
// path read and, for a symlink, its target) and the dsh homes (homes).
func protectedPaths(ws string, profileFiles []string, dshEnv map[string]string) []string {
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
	if ws != "" {
		add(filepath.Join(ws, ".git"))
		add(filepath.Join(ws, ".dsh"))
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
