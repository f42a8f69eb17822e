package profiles

import "embed"

// FS holds "<name>.yaml" for every built-in profile.
//
//go:embed *.yaml
var FS embed.FS

// Names lists the built-in profiles.
var Names = []string{"default", "minimal", "sandbox"}
