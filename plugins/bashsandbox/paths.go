package bashsandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// within reports whether path is root or lies beneath it.
func within(path, root string) bool {
	return path == root || root == "/" || strings.HasPrefix(path, root+"/")
}

// visibleInSandbox reports whether a confined command could see the host path p
// (canonical): outside /tmp, which the private /tmp covers, or inside one of the
// writable roots, which are bound over it.
func visibleInSandbox(p string, writable []string) bool {
	if !within(p, "/tmp") {
		return true
	}
	return slices.ContainsFunc(writable, func(w string) bool { return within(p, w) })
}

// symlinkBelow returns the first directory strictly between root and path (which lies
// in root) that is a symbolic link, or "".
func symlinkBelow(root, path string) string {
	rest := strings.TrimPrefix(strings.TrimPrefix(path, root), "/")
	dir := root
	for {
		elem, more, ok := strings.Cut(rest, "/")
		if !ok {
			return ""
		}
		dir = filepath.Join(dir, elem)
		if fi, err := os.Lstat(dir); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return dir
		}
		rest = more
	}
}

// canonicalDir makes dir absolute, resolves every symlink and checks it is a directory.
func canonicalDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	canon, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(canon)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", canon)
	}
	return canon, nil
}
