package bashsandbox

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"weak"

	"github.com/dsh-dev/dsh/plugins/shell"
	"github.com/dsh-dev/dsh/plugins/subprocess"
)

// The configuration each Supervisor's bash-sandbox last applied: a reload restarts the
// executor with a new configuration, and a wider one must not pass unnoticed (the user
// may mean it, so it is applied — and logged). Keyed weakly: a closed Supervisor's entry
// goes with it.
var applied = struct {
	mu sync.Mutex
	m  map[weak.Pointer[subprocess.Supervisor]]*Config
}{m: map[weak.Pointer[subprocess.Supervisor]]*Config{}}

// rememberConfig records cfg as sup's current configuration and returns, worded for
// the log line "profile reload widens confinement: <what>", each way it is wider than
// the previous one.
func rememberConfig(sup *subprocess.Supervisor, cfg *Config) []string {
	key := weak.Make(sup)
	applied.mu.Lock()
	prev, seen := applied.m[key]
	c := *cfg
	c.WritableRoots = slices.Clone(cfg.WritableRoots)
	applied.m[key] = &c
	applied.mu.Unlock()
	if !seen {
		runtime.AddCleanup(sup, func(k weak.Pointer[subprocess.Supervisor]) {
			applied.mu.Lock()
			delete(applied.m, k)
			applied.mu.Unlock()
		}, key)
		return nil
	}
	return widenings(prev, cfg)
}

// widenings lists how next is wider than prev: a wider default mode, the network
// allowed, an added writable root, namespaces turned off.
func widenings(prev, next *Config) []string {
	var out []string
	if shell.ModeRank(next.DefaultMode) > shell.ModeRank(prev.DefaultMode) {
		out = append(out, fmt.Sprintf("bash-sandbox defaultMode %s → %s", prev.DefaultMode, next.DefaultMode))
	}
	if prev.Network == NetworkDeny && next.Network == NetworkAllow {
		out = append(out, "bash-sandbox network deny → allow")
	}
	for _, r := range next.WritableRoots {
		if !slices.Contains(prev.WritableRoots, r) {
			out = append(out, fmt.Sprintf("bash-sandbox writable root added: %s", r))
		}
	}
	if prev.Namespaces != NamespacesOff && next.Namespaces == NamespacesOff {
		out = append(out, "bash-sandbox namespaces auto → off (Landlock only)")
	}
	return out
}
