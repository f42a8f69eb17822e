package bashsandbox

import (
	"path/filepath"
	"slices"
)

// auditLogVar is the managed variable naming the calling session's audit log (the
// session-log plugin's): the box shows that one file read-only and hides the
// directory of every session's logs.
const auditLogVar = "DSH_SESSION_JSONL"

// withAuditLog adds to a confined call's box what it must keep of the session logs:
// their directory masked (unless the private /tmp hides it already), the session's own
// file shown read-only (namespaces only; a Landlock-only box cannot hide them). Nothing
// when the call names no log. The directory is checked like the spill root
// (maskableDir): one a writable root exposes refuses the call.
func withAuditLog(box *boxConfig, dshEnv map[string]string, writable []string) error {
	file := dshEnv[auditLogVar]
	if file == "" || !filepath.IsAbs(file) {
		return nil
	}
	dir, err := maskableDir("the session logs' directory", filepath.Dir(file), writable)
	if err != nil {
		return err
	}
	if dir != "" && !slices.Contains(box.maskDirs, dir) {
		box.maskDirs = append(slices.Clone(box.maskDirs), dir)
	}
	if dir == "" { // hidden already (under the private /tmp), or absent: shown if it is there
		if dir, err = filepath.EvalSymlinks(filepath.Dir(file)); err != nil {
			return nil
		}
	}
	box.show = []string{filepath.Join(dir, filepath.Base(file))}
	return nil
}
