package bashsandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/dsh-dev/dsh/shell"
)

// checkWritableRoots refuses, as validation (so `dsh check` and a reload do too), the
// writableRoots that would fail the row at start or every confined call: one that is not
// an existing directory, and one that is or holds the temp dir, which holds every
// session's private temp dir (and, by default, the spill root) and so could not be
// hidden from confined commands. Errors start with the key.
func (c *Config) checkWritableRoots() error {
	var roots, keys []string
	for i, r := range c.WritableRoots {
		canon, err := canonicalDir(r)
		if err != nil {
			return fmt.Errorf("%s: %w", keyOf(i), err)
		}
		roots, keys = append(roots, canon), append(keys, keyOf(i))
	}
	tmp, err := filepath.EvalSymlinks(os.TempDir())
	if err != nil {
		return nil // no temp dir to expose; the first session directory will say why
	}
	if _, err := maskableDir("the temp dir", tmp, roots); err != nil {
		var xe *ExposedError
		if errors.As(err, &xe) {
			xe.RootKey = keys[slices.Index(roots, xe.Root)]
			return errors.New(xe.reason())
		}
		return err
	}
	return nil
}

// nameRoot names, in an *ExposedError, the writableRoots entry that set its root (the
// workspace ws needs no name).
func (s *confiner) nameRoot(err error, ws string) error {
	var xe *ExposedError
	if errors.As(err, &xe) && xe.Root != ws {
		if i := slices.Index(s.roots, xe.Root); i >= 0 {
			xe.RootKey = s.rootKeys[i]
		}
	}
	return err
}

// CheckConfinement returns the error every confined call in the workspace ws would
// fail with, or nil: no usable backend, or writable roots that would show confined
// commands what the box must hide from them. A default mode of danger-full-access
// confines nothing by default: nil. `dsh status --workspace` reports it.
func (r *Resolver) CheckConfinement(ws string) error {
	if r.check == nil || r.defaultMode == shell.ModeDangerFullAccess {
		return nil
	}
	return r.check(ws)
}

// checkWorkspace is CheckConfinement's work: what prepare would refuse before a box
// starts, for a call in the default mode with ws as its workspace.
func (s *confiner) checkWorkspace(ws string) error {
	be := chooseBackend(s.namespaces)
	if !be.usable {
		return &UnavailableError{Mode: s.resolver.defaultMode, Reason: be.reason}
	}
	canon, err := canonicalDir(ws)
	if err != nil {
		return err
	}
	_, err = s.confinementOf(be, s.resolver.defaultMode, canon, nil)
	return err
}

// keyOf is the key of the i-th writableRoots entry, as errors name it.
func keyOf(i int) string { return "writableRoots[" + strconv.Itoa(i) + "]" }
