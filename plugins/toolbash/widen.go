package toolbash

import (
	"runtime"
	"sync"
	"weak"

	"github.com/dsh-dev/dsh/plugins/tools"
)

// The default sandbox mode of the executor each tools registry's bash tool last ran
// over ("" for one that does not confine). The tool restarts whenever its executor is
// replaced, so a profile reload that swaps a confining executor for one that does not
// is seen here. Keyed weakly by the registry, which outlives executor reloads.
var lastModes = struct {
	mu sync.Mutex
	m  map[weak.Pointer[tools.Registry]]string
}{m: map[weak.Pointer[tools.Registry]]string{}}

// rememberMode records mode for reg and returns the previous one, if any.
func rememberMode(reg *tools.Registry, mode string) (prev string, seen bool) {
	key := weak.Make(reg)
	lastModes.mu.Lock()
	defer lastModes.mu.Unlock()
	prev, seen = lastModes.m[key]
	lastModes.m[key] = mode
	if !seen {
		runtime.AddCleanup(reg, func(k weak.Pointer[tools.Registry]) {
			lastModes.mu.Lock()
			delete(lastModes.m, k)
			lastModes.mu.Unlock()
		}, key)
	}
	return prev, seen
}
