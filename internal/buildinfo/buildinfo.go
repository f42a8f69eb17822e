// Package buildinfo says which dsh this is: the version the binary's build info
// carries, for `dsh --version`, the MCP serverInfo and the audit log.
package buildinfo

import "runtime/debug"

// develVersion is what a build without module or VCS information reports: Go leaves
// both out when VCS stamping is off (-buildvcs=false) or the source is not in a
// repository it recognizes (a git worktree, a tarball).
const develVersion = "(devel)"

// Version is dsh's version: the module version when dsh was built as a module
// dependency or from a tagged checkout, else the VCS revision the build info carries
// (12 hex digits, "-dirty" when the tree had uncommitted changes), else "(devel)".
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return develVersion
	}
	return VersionOf(bi)
}

// VersionOf is the version bi names (Version).
func VersionOf(bi *debug.BuildInfo) string {
	var revision string
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if v := bi.Main.Version; v != "" && v != develVersion {
		return v
	}
	if revision == "" {
		return develVersion
	}
	if len(revision) > 12 {
		revision = revision[:12]
	}
	if modified {
		revision += "-dirty"
	}
	return revision
}
