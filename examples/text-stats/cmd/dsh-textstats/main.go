// Command dsh-textstats is dsh with one extra plugin, text-stats: the way a plugin
// author ships a harness with their own tools.
//
//	go run ./examples/text-stats/cmd/dsh-textstats call --profile examples/text-stats/example.yaml \
//		text_stats '{"text": "one two\nthree\n"}'
package main

import (
	"os"

	"github.com/dsh-dev/dsh/cli"
	textstats "github.com/dsh-dev/dsh/examples/text-stats"
	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
)

func main() {
	bashsandbox.MaybeRunLauncher() // first: a sandbox box is this binary, re-executed
	os.Exit(cli.Main(os.Args[1:], textstats.Module))
}
