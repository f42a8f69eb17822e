package cli

import "github.com/dsh-dev/dsh/internal/buildinfo"

// version is dsh's version (buildinfo.Version).
func version() string { return buildinfo.Version() }

// versionOf is the version a build info names.
var versionOf = buildinfo.VersionOf
