package bashsandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dsh-dev/dsh/plugins/subprocess"
)

// What a harness session keeps across executor activations (a reload restarts the
// executor, not the session): its pinned workspace, its private temp dir and its
// session sandboxes. Sessions are kept per owner — the Supervisor the executor spawns
// through — and ended by the container's session-end hook.
var registry = struct {
	mu     sync.Mutex
	m      map[sessKey]*session
	owners map[any]bool // owners whose end is hooked to their Supervisor's Close
}{m: map[sessKey]*session{}, owners: map[any]bool{}}

type sessKey struct {
	owner any // the *subprocess.Supervisor (or, without one, the Resolver)
	id    string
}

// session is one harness session's sandbox state.
type session struct {
	key sessKey

	mu    sync.Mutex
	pin   *pin
	dir   string // host directory holding tmp/ and stage/ ("" until first needed)
	boxes []*box
	ended bool

	opening sync.Mutex // one box opened at a time
}

// sessionFor returns the state of session id under owner, creating it.
func sessionFor(owner any, id string) *session {
	registry.mu.Lock()
	k := sessKey{owner, id}
	s := registry.m[k]
	if s == nil {
		s = &session{key: k}
		registry.m[k] = s
	}
	sup, hook := owner.(*subprocess.Supervisor)
	hook = hook && !registry.owners[owner]
	if hook {
		registry.owners[owner] = true
	}
	registry.mu.Unlock()
	if hook {
		// The sessions of a Supervisor end with it, whoever closes it.
		sup.OnClose(func() { endOwner(owner) })
	}
	return s
}

// endSession forgets session id under owner: its sandboxes take no new commands and
// close once their commands are released; then its temp dir is removed.
func endSession(owner any, id string) {
	registry.mu.Lock()
	k := sessKey{owner, id}
	s := registry.m[k]
	delete(registry.m, k)
	registry.mu.Unlock()
	if s != nil {
		s.end()
	}
}

// endOwner ends every session of owner (its Supervisor is closed).
func endOwner(owner any) {
	registry.mu.Lock()
	delete(registry.owners, owner)
	var ended []*session
	for k, s := range registry.m {
		if k.owner == owner {
			ended = append(ended, s)
			delete(registry.m, k)
		}
	}
	registry.mu.Unlock()
	for _, s := range ended {
		s.end()
	}
}

func (s *session) end() {
	s.mu.Lock()
	s.ended = true
	boxes := s.boxes
	s.boxes = nil
	p := s.pin
	dir := s.dir
	s.mu.Unlock()
	for _, b := range boxes {
		b.retire()
	}
	cleanup := func() {
		for _, b := range boxes {
			<-b.proc.Done()
		}
		if dir != "" {
			_ = os.RemoveAll(dir)
			_ = os.Remove(filepath.Dir(dir)) // the base, when no other session has a directory in it
		}
		if p != nil {
			p.dir.Close()
		}
	}
	// Idle sandboxes exit at once: clean up before returning (a `dsh call` exits right
	// after its session ends). One still running commands is waited for in the
	// background.
	deadline := time.After(endWait)
	for _, b := range boxes {
		select {
		case <-b.proc.Done():
		case <-deadline:
			go cleanup()
			return
		}
	}
	cleanup()
}

// endWait bounds how long a session's end waits for its sandboxes to exit.
const endWait = 2 * time.Second

// workspace pins dir as the session's workspace root the first time (the session's
// start, as far as the sandbox can tell) and returns the pin; later calls check that
// the pinned path still resolves to the pinned directory.
func (s *session) workspace(dir string) (*pin, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pin == nil {
		p, err := newPin(dir)
		if err != nil {
			return nil, err
		}
		s.pin = p
	}
	return s.pin, nil
}

// dirs returns the host paths of the session's private temp dir and of the stage its
// sandboxes build their root on, made on first use.
func (s *session) dirs() (tmp, stage string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir == "" {
		base, err := sandboxBase()
		if err != nil {
			return "", "", err
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
			return "", "", fmt.Errorf("bash-sandbox: session directory: %w", err)
		}
		for _, d := range []string{"tmp", "stage"} {
			if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
				os.RemoveAll(dir)
				return "", "", fmt.Errorf("bash-sandbox: session directory: %w", err)
			}
		}
		s.dir = dir
	}
	return filepath.Join(s.dir, "tmp"), filepath.Join(s.dir, "stage"), nil
}

// box returns the session's sandbox for conf, starting one when the session has none
// with that configuration (a reload changed it, or the last one died); an older one is
// retired (it closes when its commands are done). A new one starts with the protected
// paths and the masked files known now, and shows (namespaces only) the spill
// directory of owner, the session's id (see ownerSpill).
func (s *session) box(sup *subprocess.Supervisor, conf boxConfig, owner string, protect, mask []string) (*box, error) {
	if b := s.current(conf); b != nil {
		return b, nil
	}
	s.opening.Lock()
	defer s.opening.Unlock()
	if b := s.current(conf); b != nil {
		return b, nil
	}
	s.mu.Lock()
	ended := s.ended
	p := s.pin
	s.mu.Unlock()
	if ended {
		return nil, errors.New("bash-sandbox: the session has ended")
	}
	tmp, stage, err := s.dirs()
	if err != nil {
		return nil, err
	}
	var ws *os.File
	if conf.workspace != "" {
		if p == nil || p.path != conf.workspace {
			return nil, fmt.Errorf("bash-sandbox: the workspace %q is not the session's pinned workspace", conf.workspace)
		}
		ws = p.dir
	}
	var spill *os.File
	spillPath := ""
	if conf.namespaces {
		spillPath, spill = ownerSpill(sup, owner)
	}
	b, err := openBox(sup, conf, tmp, stage, ws, spillPath, spill, protect, mask)
	if spill != nil {
		spill.Close()
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	old := s.boxes
	s.boxes = []*box{b}
	ended = s.ended
	s.mu.Unlock()
	for _, o := range old {
		o.retire()
	}
	if ended {
		b.retire()
	}
	go func() {
		<-b.proc.Done()
		b.fail()
	}()
	return b, nil
}

// ownerSpill returns the spill directory of owner's streams — made now, and kept until
// the session ends (proc.Spool.OwnerDir) — for the session sandbox to show its
// commands, read-only, at the path its results name (the namespace backend hides the
// spill root, and the host's /tmp, from them): its canonical path and the directory.
// Nothing when it cannot be made: no spill path would then be reported either.
func ownerSpill(sup *subprocess.Supervisor, owner string) (string, *os.File) {
	f, err := sup.Spool().OwnerDir(owner)
	if err != nil {
		return "", nil // the spool logged why
	}
	canon, err := filepath.EvalSymlinks(f.Name())
	if err != nil {
		f.Close()
		return "", nil
	}
	return canon, f
}

// current returns the session's usable box for conf, if any.
func (s *session) current(conf boxConfig) *box {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.boxes {
		if b.usable() && b.conf.equal(conf) {
			return b
		}
	}
	return nil
}

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

// The base directory of this process's session directories, under the temp dir; those
// of dead dsh processes are removed when it is made.
var sandboxBase = sync.OnceValues(func() (string, error) {
	root := os.TempDir()
	removeStaleBases(root)
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
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "dsh-sandbox-")
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		dir := filepath.Join(root, e.Name())
		if fi, err := os.Lstat(dir); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == os.Getuid() {
				_ = os.RemoveAll(dir)
			}
		}
	}
}

// oPath is O_PATH (the syscall package does not name it).
const oPath = 0o10000000
