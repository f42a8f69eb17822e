// Package early starts the subprocess Supervisor's crash-cleanup watchdog before the
// rest of the binary is initialised, for a main that will spawn commands: its
// re-executions then run beside that initialisation rather than beside the first
// command. The first Supervisor the process makes takes it over; one made without it
// starts its own, as always. It imports nothing but the watchdog, so that a main
// package's import of it is initialised right after package os.
package early

import "github.com/dsh-dev/dsh/plugins/subprocess/internal/watchdog"

// Watchdog starts the watchdog now (see the package documentation). Call it once, from
// an init function of a package that imports little else.
func Watchdog() { watchdog.Prestart() }
