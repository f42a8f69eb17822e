// Package prestart starts dsh's crash-cleanup watchdog from its init function, before
// the rest of the binary is initialised, when the subcommand is one that spawns
// commands (serve, call): see package early. Its imports are kept minimal for that.
package prestart

import (
	"os"

	"github.com/dsh-dev/dsh/plugins/subprocess/early"
)

func init() {
	if spawns(os.Args[1:]) {
		early.Watchdog()
	}
}

// valued are dsh's global flags that take a separate value (`-p sandbox`).
var valued = map[string]bool{"-p": true, "--profile": true, "--log-level": true}

// spawns reports whether args name a subcommand that spawns commands. A wrong guess
// costs or saves only the few milliseconds of the watchdog's start.
func spawns(args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case valued[a]:
			i++
		case len(a) > 0 && a[0] == '-':
		default:
			return a == "serve" || a == "call"
		}
	}
	return false
}
