// Command dsh-nice is dsh with the bash-nice executor compiled in: the way an executor
// from another Go module ships.
package main

import (
	"os"

	bashnice "example.com/bash-nice"
	"github.com/dsh-dev/dsh/cli"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
)

func main() {
	bashsandbox.MaybeRunLauncher() // first: a sandbox box is this binary, re-executed
	os.Exit(cli.Main(os.Args[1:], bashnice.Module))
}
