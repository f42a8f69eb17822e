// Command dsh runs a dsh harness: it composes a profile of plugins and serves its tools
// over MCP, or runs one call, or reports on the composition. See `dsh --help`.
package main

import (
	"os"

	"github.com/dsh-dev/dsh/cli"
	"github.com/dsh-dev/dsh/mcpserve"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
)

func main() {
	// First, before anything else runs: when re-executed as the sandbox launcher, this
	// confines the process and execs the command; it never returns then.
	bashsandbox.MaybeRunLauncher()
	// dsh owns its process, so it alone may choose its processors (Tuning.FewerProcs).
	tuning := mcpserve.DefaultTuning()
	tuning.ApplyProcs()
	os.Exit(cli.Run(os.Args[1:], cli.Options{Tuning: tuning}))
}
