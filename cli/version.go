package cli

import "runtime/debug"

// develVersion is what a build without module or VCS information reports: Go leaves
// both out when VCS stamping is off (-buildvcs=false) or the source is not in a
// repository it recognizes (a git worktree, a tarball).
const develVersion = "(devel)"

// version is dsh's version: the module version when dsh was built as a module
// dependency or from a tagged checkout, else the VCS revision the build info carries
// (12 hex digits, "-dirty" when the tree had uncommitted changes), else "(devel)".
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return develVersion
	}
	return versionOf(bi)
}

func versionOf(bi *debug.BuildInfo) string {
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
