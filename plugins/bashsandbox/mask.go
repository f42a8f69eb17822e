package bashsandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// ServeTokenName is the file in the dsh home where `dsh serve --http` writes the bearer
// token it generates.
const ServeTokenName = "serve-token"

// secrets are the files of this process that confined commands must not read (MaskFile).
var secrets struct {
	mu    sync.Mutex
	paths []string
}

// MaskFile keeps the file at path — a secret of this process, such as the bearer-token
// file of `dsh serve --http` — from the confined commands of this process's boxes
// (namespace backend): wherever a command could read it, the box masks it with an
// empty read-only file before each command starts (so a file that appears, or is
// replaced, later is masked from the next command on). $DSH_HOME/serve-token (and
// ~/.dsh/serve-token) is always masked. The Landlock-only fallback cannot mask a file
// (MissingSecretFiles).
func MaskFile(path string) {
	if abs, err := filepath.Abs(path); err == nil {
		secrets.mu.Lock()
		if !slices.Contains(secrets.paths, abs) {
			secrets.paths = append(secrets.paths, abs)
		}
		secrets.mu.Unlock()
	}
}

// maskedFiles lists the secret files a command of a call could read, to be masked: the
// serve-token of every home (the call's, this process's, the default ~/.dsh) and the
// MaskFile files, canonical where they exist, except those the private /tmp covers
// anyway (under /tmp and in no writable root).
func maskedFiles(dshEnv map[string]string, writable []string) []string {
	hs := homes(dshEnv)
	if home, err := os.UserHomeDir(); err == nil {
		hs = append(hs, filepath.Join(home, ".dsh")) // the default home, another dsh's
	}
	var candidates []string
	for _, h := range hs {
		if h != "" && filepath.IsAbs(h) {
			candidates = append(candidates, filepath.Join(h, ServeTokenName))
		}
	}
	secrets.mu.Lock()
	candidates = append(candidates, secrets.paths...)
	secrets.mu.Unlock()
	var out []string
	for _, p := range candidates {
		p = filepath.Clean(p)
		if canon, err := filepath.EvalSymlinks(p); err == nil {
			p = canon
		}
		if visibleInSandbox(p, writable) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// maskedDirs are the host directories the namespace backend masks with an empty
// read-only tmpfs, wherever a confined command could otherwise see them — outside /tmp
// (the box shows the host's tree read-only) or inside a writable root (bound over the
// private /tmp): the spill root, which holds every session's spill files, the temp
// dir, which holds every session's private temp dir (of this dsh and of others), and
// the registry of dsh processes. One
// that holds a writable root cannot be masked without masking the root too, and a
// spill root inside a writable root that does not exist, or is reached through a
// symbolic link, could be planted (dsh follows it): the call is then refused with an
// *ExposedError.
func maskedDirs(writable []string, spillRoot string) ([]string, error) {
	var out []string
	add := func(what, path string) error {
		canon, err := maskableDir(what, path, writable)
		if err == nil && canon != "" && !slices.Contains(out, canon) {
			out = append(out, canon)
		}
		return err
	}
	if err := add("the spill root", spillRoot); err != nil {
		return nil, err
	}
	// Every dsh's session directories are made by path under its temp dir (this one's
	// under the same parent as base): mask the parent, not only this process's base.
	base, err := sandboxBase()
	if err != nil {
		return nil, err
	}
	if err := add("the temp dir", filepath.Dir(base)); err != nil {
		return nil, err
	}
	// The registry of dsh processes, where a writable root would let a command change
	// what other dsh processes mask (instances.go).
	if err := add("the registry of dsh processes", instancesDir()); err != nil {
		return nil, err
	}
	return out, nil
}

// maskableDir checks the directory path that what names against the writable roots and
// returns its canonical path when a confined command could see it, "" when it cannot
// (or path does not exist, out of every writable root), or an *ExposedError.
func maskableDir(what, path string, writable []string) (string, error) {
	if path == "" {
		return "", nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", nil
	}
	canon, err := filepath.EvalSymlinks(abs)
	for _, w := range writable {
		if !within(abs, w) && (err != nil || !within(canon, w)) {
			continue
		}
		switch {
		case err != nil:
			return "", &ExposedError{What: what, Path: abs, Root: w, Why: "does not exist, so a confined command could create it"}
		case canon != abs:
			return "", &ExposedError{What: what, Path: abs, Root: w, Why: "is reached through a symbolic link, which a confined command could change"}
		}
	}
	if err != nil {
		return "", nil // not there, and out of every writable root: nothing to see
	}
	if !visibleInSandbox(canon, writable) {
		return "", nil
	}
	if w := heldRoot(canon, writable); w != "" {
		return "", &ExposedError{What: what, Path: canon, Root: w, Holds: true}
	}
	return canon, nil
}

// heldRoot is a writable root that dir is or holds, or "". A root that is dir itself
// comes first: that root is what shows dir to confined commands (writableRoots: [/tmp] with
// the spill root /tmp, which also holds a workspace under /tmp).
func heldRoot(dir string, writable []string) string {
	if slices.Contains(writable, dir) {
		return dir
	}
	for _, w := range writable {
		if within(w, dir) {
			return w
		}
	}
	return ""
}

// ExposedError refuses a confined call whose writable roots would show confined
// commands what dsh keeps from them (the spill files, the sessions' private temp
// dirs), or let them redirect where dsh writes: nothing runs.
type ExposedError struct {
	// What names the directory ("the spill root", "the temp dir"),
	// Path is it, Root the writable root (the workspace or a writableRoots entry).
	What, Path, Root string
	// RootKey names Root when a writableRoots entry set it ("writableRoots[0]"); empty
	// for the workspace.
	RootKey string
	// Holds: Path is or holds Root. Otherwise it lies in Root, and Why says what is
	// wrong with it.
	Holds bool
	Why   string
}

func (e *ExposedError) Error() string { return pluginName + ": " + e.reason() }

// reason is the error without the plugin's name.
func (e *ExposedError) reason() string {
	root := fmt.Sprintf("%q", e.Root)
	if e.RootKey != "" {
		root += " (" + e.RootKey + ")"
	}
	where := fmt.Sprintf("lies in the writable root %s and %s", root, e.Why)
	if e.Holds {
		where = fmt.Sprintf("holds the writable root %s, so it cannot be hidden from confined commands", root)
	}
	return fmt.Sprintf("%s %q %s; refusing to run confined commands (keep it out of the workspace and writableRoots, or move it: subprocess spillRoot, TMPDIR)",
		e.What, e.Path, where)
}
