// Command dsh-workspace is dsh with one extra plugin, workspace-env: the way a plugin
// author ships a harness with their own providers.
package main

import (
	"os"

	"github.com/dsh-dev/dsh/cli"
	workspaceenv "github.com/dsh-dev/dsh/examples/workspace-env"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
)

func main() {
	bashsandbox.MaybeRunLauncher() // first: a sandbox box is this binary, re-executed
	os.Exit(cli.Main(os.Args[1:], workspaceenv.Module))
}
