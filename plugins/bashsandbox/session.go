package bashsandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/plugins/subprocess"
)

// What a harness session keeps across executor activations (a reload restarts the
// executor, not the session): its pinned workspace, its private temp dir and its
// boxes. Sessions are kept per owner — the Supervisor the executor spawns
// through — and ended by the container's session-end hook.
var registry = struct {
	mu     sync.Mutex
	m      map[sessKey]*sessionState
	owners map[any]bool            // owners whose end is hooked to their Supervisor's Close
	ending map[any]*sync.WaitGroup // session ends in progress (cleanups included), by owner
}{m: map[sessKey]*sessionState{}, owners: map[any]bool{}, ending: map[any]*sync.WaitGroup{}}

// endingOf counts a session end of owner until its done is called. Called with
// registry.mu held.
func endingOf(owner any) *sync.WaitGroup {
	wg := registry.ending[owner]
	if wg == nil {
		wg = &sync.WaitGroup{}
		registry.ending[owner] = wg
	}
	wg.Add(1)
	return wg
}

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
	boxes []*box
	ended bool

	opening sync.Mutex // one box opened at a time
}

// sessionFor returns the state of session id under owner, creating it.
func sessionFor(owner any, id string) *sessionState {
	registry.mu.Lock()
	k := sessKey{owner, id}
	s := registry.m[k]
	if s == nil {
		s = &sessionState{key: k}
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

// endSession forgets session id under owner: its boxes take no new commands and
// close once their commands are released; then its temp dir is removed.
func endSession(owner any, id string) {
	registry.mu.Lock()
	k := sessKey{owner, id}
	s := registry.m[k]
	delete(registry.m, k)
	ending := endingOf(owner)
	registry.mu.Unlock()
	defer ending.Done()
	if s != nil {
		s.end(ending)
	}
}

// endOwner ends every session of owner (its Supervisor is closed).
func endOwner(owner any) {
	registry.mu.Lock()
	delete(registry.owners, owner)
	var ended []*sessionState
	for k, s := range registry.m {
		if k.owner == owner {
			ended = append(ended, s)
			delete(registry.m, k)
		}
	}
	ending := endingOf(owner)
	registry.mu.Unlock()
	for _, s := range ended {
		s.end(ending)
	}
	ending.Done()
	// Every process of the Supervisor is gone by now, so the session ends still in
	// progress (one racing this Close, or a cleanup left to the background) finish at
	// once: wait for them, or the harness exits with their directories on disk.
	ending.Wait()
}

// end retires s's boxes and removes its directory, in the background (counted in
// ending) for boxes still running commands after endWait.
func (s *sessionState) end(ending *sync.WaitGroup) {
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
	// Idle boxes exit at once: clean up before returning (a `dsh call` exits right
	// after its session ends). One still running commands is waited for in the
	// background.
	deadline := time.After(endWait)
	for _, b := range boxes {
		select {
		case <-b.proc.Done():
		case <-deadline:
			ending.Add(1)
			go func() {
				defer ending.Done()
				cleanup()
			}()
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
// directory of owner, the session's id (see ownerSpill).
func (s *sessionState) box(sup *subprocess.Supervisor, conf boxConfig, owner string, protect, maskFiles []string) (*box, error) {
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
	b, err := openBox(sup, conf, files, protect, maskFiles)
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
	ended := s.ended
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
