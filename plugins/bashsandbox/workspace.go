package bashsandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// pin is a workspace root resolved once: its canonical path and the directory itself,
// held open.
type pin struct {
	path     string
	dir      *os.File // O_PATH
	dev, ino uint64
}

func newPin(dir string) (*pin, error) {
	canon, err := canonicalDir(dir)
	if err != nil {
		return nil, fmt.Errorf("bash-sandbox: workspace root: %w", err)
	}
	fd, err := syscall.Open(canon, oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("bash-sandbox: workspace root %s: %w", canon, err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("bash-sandbox: workspace root %s: %w", canon, err)
	}
	return &pin{path: canon, dir: os.NewFile(uintptr(fd), canon), dev: uint64(st.Dev), ino: st.Ino}, nil
}

// WorkspaceMovedError is the infrastructure error of a confined call whose session's
// workspace root no longer resolves to the directory pinned when the session started:
// nothing runs.
type WorkspaceMovedError struct {
	// Workspace is the pinned path.
	Workspace string
	// Now says what the path resolves to instead.
	Now string
}

func (e *WorkspaceMovedError) Error() string {
	return fmt.Sprintf("bash-sandbox: the workspace %q no longer resolves to the directory pinned when the session started (%s); refusing to run confined commands in it", e.Workspace, e.Now)
}

// check fails with a *WorkspaceMovedError when the pinned path now resolves to another
// directory (renamed, replaced by a symlink) or to nothing.
func (p *pin) check() error {
	var st syscall.Stat_t
	if err := syscall.Stat(p.path, &st); err != nil {
		return &WorkspaceMovedError{Workspace: p.path, Now: err.Error()}
	}
	if uint64(st.Dev) != p.dev || st.Ino != p.ino {
		now := "another directory"
		if real, err := filepath.EvalSymlinks(p.path); err == nil && real != p.path {
			now = "it now resolves to " + strconv.Quote(real)
		}
		return &WorkspaceMovedError{Workspace: p.path, Now: now}
	}
	return nil
}

// oPath is O_PATH (the syscall package does not name it).
const oPath = 0o10000000
