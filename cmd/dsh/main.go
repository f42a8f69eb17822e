// Command dsh runs a dsh harness: it composes a profile of plugins and serves its tools
// over MCP, or runs one call, or reports on the composition. See `dsh --help`.
package main

import (
	"os"

	"github.com/dsh-dev/dsh/cli"
	_ "github.com/dsh-dev/dsh/cmd/dsh/internal/prestart" // the crash-cleanup watchdog, first of all
	"github.com/dsh-dev/dsh/mcpserve"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
)

func main() {
	// First, before anything else runs: when this process is a sandbox box (dsh
	// re-executed), this runs the launcher and never returns.
	bashsandbox.MaybeRunLauncher()
	// dsh owns its process, so it alone may choose its processors (Tuning.FewerProcs).
	tuning := mcpserve.DefaultTuning()
	tuning.ApplyProcs()
	os.Exit(cli.Run(os.Args[1:], cli.Options{Tuning: tuning}))
}
