package bashsandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
)

// What a harness session keeps across executor activations (a reload restarts the
// executor, not the session): its pinned workspace, its private temp dir and its
// boxes. Sessions are kept per owner — the Supervisor the executor spawns
// through — and ended when the Supervisor ends the session (Supervisor.EndOwner, once
// the session's processes are gone, whichever executor is active by then) or closes.
var registry = struct {
	mu     sync.Mutex
	m      map[sessKey]*sessionState
	owners map[any]bool // owners whose end is hooked to their Supervisor's Close
	// ending are the sessions ended and not yet cleaned up (their boxes exiting): the
	// Supervisor's Close waits for them, so that no temp dir outlives the process.
	ending map[*sessionState]bool
}{m: map[sessKey]*sessionState{}, owners: map[any]bool{}, ending: map[*sessionState]bool{}}

type sessKey struct {
	owner any // the *subprocess.Supervisor (or, without one, the Resolver)
	id    string
}

// sessionState is what one harness session keeps for confinement.
type sessionState struct {
	key sessKey

	mu    sync.Mutex
	pin   *pin
	dir   string // host directory holding tmp/ and stage/ ("" until first needed)
	boxes []*box // the boxes new calls may be handed
	// retired are the session's other boxes that may still run commands: replaced by
	// a reload, retired by their executor's end, or a box of one escalated call. Each
	// closes when its last command is released; the session's end waits for them.
	retired []*box
	ended   bool
	cleaned chan struct{} // closed once the ended session is cleaned up

	opening sync.Mutex // one box opened at a time
	// limitsPrepared: its first command's cgroups were asked for (prepareLimits).
	limitsPrepared atomic.Bool
}

// sessionFor returns the state of session id under owner, creating it.
func sessionFor(owner any, id string) *sessionState {
	registry.mu.Lock()
	k := sessKey{owner, id}
	s := registry.m[k]
	if s == nil {
		s = &sessionState{key: k, cleaned: make(chan struct{})}
		registry.m[k] = s
	}
	sup, hook := owner.(*subprocess.Supervisor)
	hook = hook && !registry.owners[owner]
	if hook {
		registry.owners[owner] = true
	}
	registry.mu.Unlock()
	if hook {
		// The sessions of a Supervisor end with it, whoever closes it, and each when
		// the Supervisor ends it, whatever executor is active then.
		sup.OnClose(func() { endOwner(owner) })
		sup.OnEndOwner(func(id string) { endSession(owner, id) })
	}
	return s
}

// retireOwner retires every box of owner's sessions (their executor's activation
// ended: a reload restarted it, or swapped it for another): none is handed to a new
// call, and each closes once its last command is released — at the latest when its
// session ends. The sessions themselves (pins, temp dirs) live on.
func retireOwner(owner any) {
	registry.mu.Lock()
	var sessions []*sessionState
	for k, s := range registry.m {
		if k.owner == owner {
			sessions = append(sessions, s)
		}
	}
	registry.mu.Unlock()
	for _, s := range sessions {
		s.mu.Lock()
		boxes := s.boxes
		s.boxes = nil
		s.keepRetiredLocked(boxes...)
		s.mu.Unlock()
		for _, b := range boxes {
			b.retire()
		}
	}
}

// keepRetiredLocked adds boxes to the retired ones and forgets those that have exited
// (s.mu held).
func (s *sessionState) keepRetiredLocked(boxes ...*box) {
	kept := s.retired[:0]
	for _, b := range s.retired {
		select {
		case <-b.proc.Done():
		default:
			kept = append(kept, b)
		}
	}
	clear(s.retired[len(kept):])
	s.retired = append(kept, boxes...)
}

// endSession forgets session id under owner: its boxes take no new commands and
// close once their commands are released; then its temp dir is removed.
func endSession(owner any, id string) {
	registry.mu.Lock()
	k := sessKey{owner, id}
	s := registry.m[k]
	delete(registry.m, k)
	if s != nil {
		registry.ending[s] = true
	}
	registry.mu.Unlock()
	if s != nil {
		s.end()
	}
}

// endOwner ends every session of owner (its Supervisor is closed: every process is
// gone) and waits until each ended session, also one ended just before, is cleaned up.
func endOwner(owner any) {
	registry.mu.Lock()
	delete(registry.owners, owner)
	var ended, ending []*sessionState
	for k, s := range registry.m {
		if k.owner == owner {
			ended = append(ended, s)
			delete(registry.m, k)
			registry.ending[s] = true
		}
	}
	for s := range registry.ending {
		if s.key.owner == owner {
			ending = append(ending, s)
		}
	}
	registry.mu.Unlock()
	for _, s := range ended {
		s.end()
	}
	t := time.NewTimer(closeWait + endWait)
	defer t.Stop()
	for _, s := range ending {
		select {
		case <-s.cleaned:
		case <-t.C:
			return
		}
	}
}

func (s *sessionState) end() {
	s.mu.Lock()
	s.ended = true
	boxes := append(s.boxes, s.retired...)
	s.boxes, s.retired = nil, nil
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
		registry.mu.Lock()
		delete(registry.ending, s)
		registry.mu.Unlock()
		close(s.cleaned)
	}
	// Idle boxes exit at once: clean up before returning (a `dsh call` exits right
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

// endWait bounds how long a session's end waits for its boxes to exit.
const endWait = 2 * time.Second

// workspace pins dir as the session's workspace root the first time (the session's
// start, as far as the sandbox can tell) and returns the pin; later calls check that
// the pinned path still resolves to the pinned directory.
func (s *sessionState) workspace(dir string) (*pin, error) {
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
// boxes build their root on, made on first use.
func (s *sessionState) dirs() (tmp, stage string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir == "" {
		dir, err := newSessionDir()
		if err != nil {
			return "", "", err
		}
		s.dir = dir
	}
	return filepath.Join(s.dir, "tmp"), filepath.Join(s.dir, "stage"), nil
}

// tempDir is the session's private temp dir as its commands see it: /tmp in the
// namespaces (the box binds it there), its host path otherwise.
func (s *sessionState) tempDir(namespaces bool) (string, error) {
	tmp, _, err := s.dirs()
	if err != nil {
		return "", err
	}
	if namespaces {
		return "/tmp", nil
	}
	return tmp, nil
}

// box returns the session's box for conf, starting one when the session has none
// with that configuration (a reload changed it, or the last one died); an older one is
// retired (it closes when its commands are done). A new one starts with the protected
// paths and the masked files known now, and shows (namespaces only) the spill
// directory of owner, the session's id (see ownerSpill). It runs in the session's
// cgroups, under limits (the session's).
func (s *sessionState) box(sup *subprocess.Supervisor, conf boxConfig, owner string, limits proc.ResourceLimits, protect, maskFiles []string) (*box, error) {
	if conf.namespaces {
		conf.spillGen = sup.Spool().Generation()
	}
	if b := s.current(conf); b != nil {
		return b, nil
	}
	s.opening.Lock()
	defer s.opening.Unlock()
	if b := s.current(conf); b != nil {
		return b, nil
	}
	files, err := s.boxFiles(sup, conf, owner)
	if err != nil {
		return nil, err
	}
	b, err := openBox(sup, conf, owner, limits, files, protect, maskFiles)
	if files.spill != nil {
		files.spill.Close()
	}
	if err != nil {
		return nil, err
	}
	s.adopt(b)
	return b, nil
}

// boxFiles are the directories a new box of the session is built on.
func (s *sessionState) boxFiles(sup *subprocess.Supervisor, conf boxConfig, owner string) (boxFiles, error) {
	s.mu.Lock()
	ended := s.ended
	p := s.pin
	s.mu.Unlock()
	if ended {
		return boxFiles{}, errors.New("bash-sandbox: the session has ended")
	}
	tmp, stage, err := s.dirs()
	if err != nil {
		return boxFiles{}, err
	}
	files := boxFiles{tmp: tmp, stage: stage}
	if conf.workspace != "" {
		if p == nil || p.path != conf.workspace {
			return boxFiles{}, fmt.Errorf("bash-sandbox: the workspace %q is not the session's pinned workspace", conf.workspace)
		}
		files.ws = p.dir
	}
	if conf.namespaces {
		files.spillPath, files.spill = ownerSpill(sup, owner)
	}
	return files, nil
}

// adopt makes b the session's box: the ones before it are retired, and so is b if the
// session ended meanwhile; b fails when its process ends.
func (s *sessionState) adopt(b *box) {
	s.mu.Lock()
	old := s.boxes
	s.boxes = []*box{b}
	s.keepRetiredLocked(old...)
	ended := s.ended
	s.mu.Unlock()
	for _, o := range old {
		o.retire()
	}
	if ended {
		b.retire()
	}
	watch(b)
}

// watch has b fail when its process ends.
func watch(b *box) {
	go func() {
		<-b.proc.Done()
		b.fail()
	}()
}

// ownBox starts a box of the session's for one call only (an approved escalation): no
// other call is handed it, and it closes once that call's command is released, taking
// with it, as the init of its PID namespace, whatever the command left running. It
// starts as box does.
func (s *sessionState) ownBox(sup *subprocess.Supervisor, conf boxConfig, owner string, limits proc.ResourceLimits, protect, maskFiles []string) (*box, error) {
	files, err := s.boxFiles(sup, conf, owner)
	if err != nil {
		return nil, err
	}
	b, err := openBox(sup, conf, owner, limits, files, protect, maskFiles)
	if files.spill != nil {
		files.spill.Close()
	}
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.state, b.single = boxRetired, true // it closes when its one command is released
	b.mu.Unlock()
	s.mu.Lock()
	s.keepRetiredLocked(b)
	ended := s.ended
	s.mu.Unlock()
	if ended {
		b.close()
	}
	watch(b)
	return b, nil
}

// ownerSpill returns the spill directory of owner's streams — made now, and kept until
// the session ends (proc.Spool.OwnerDir) — for the box to show its
// commands, read-only, at the path its results name (the namespace backend masks the
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
func (s *sessionState) current(conf boxConfig) *box {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.boxes {
		if b.usable() && b.conf.equal(conf) {
			return b
		}
	}
	return nil
}
