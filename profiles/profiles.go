// Package profiles embeds dsh's built-in profiles: default, sandbox and minimal. They are
// what `--profile <name>` and `extends: <name>` refer to.
package profiles

import "embed"

// FS holds "<name>.yaml" for every built-in profile.
//
//go:embed *.yaml
var FS embed.FS

// Names lists the built-in profiles.
var Names = []string{"default", "minimal", "sandbox"}
