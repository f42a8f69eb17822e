package bashsandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/dsh-dev/dsh/proc"
)

// newSessionDir makes a session's directory under this process's base: it holds the
// session's private temp dir (tmp/) and the stage its boxes build their root on
// (stage/).
func newSessionDir() (string, error) {
	base, err := sandboxBase()
	if err != nil {
		return "", err
	}
	var dir string
	for range 3 { // the base goes when its last session does; make it again
		if err = os.Mkdir(base, 0o700); err == nil || errors.Is(err, os.ErrExist) {
			if dir, err = os.MkdirTemp(base, "s"); err == nil {
				break
			}
		}
	}
	if err != nil {
		return "", fmt.Errorf("bash-sandbox: session directory: %w", err)
	}
	for _, d := range []string{"tmp", "stage"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("bash-sandbox: session directory: %w", err)
		}
	}
	return dir, nil
}

// The base directory of this process's session directories, under the temp dir; those
// of dead dsh processes are removed (in the background) when it is made.
var sandboxBase = sync.OnceValues(func() (string, error) {
	root := os.TempDir()
	// Beside the first session's start, not before it: listing a busy /tmp takes a
	// millisecond or more.
	go removeStaleBases(root)
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return "", err
	}
	dir := filepath.Join(root, fmt.Sprintf("dsh-sandbox-%d-%s", os.Getpid(), hex.EncodeToString(suffix)))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("bash-sandbox: session directories: %w", err)
	}
	return dir, nil
})

// removeStaleBases removes the session directories of dsh processes that no longer run
// (and belonged to this user).
func removeStaleBases(root string) {
	fd, err := syscall.Open(root, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer syscall.Close(fd)
	proc.RemoveDeadInstances(fd, sandboxDirPrefix, func(name string) {
		_ = os.RemoveAll(filepath.Join(root, name)) // never follows a symlink below root
	})
}
