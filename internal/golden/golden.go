// Package golden compares what a test derives with a file the package embeds, which
// `go test -update` rewrites.
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files from what the tests derive")

// JSON checks that embedded, the contents of file (in the package's directory) as the
// package embeds it, is v as indented JSON with a final newline; with -update it
// writes file instead.
func JSON(t testing.TB, file string, embedded []byte, v any) {
	t.Helper()
	want, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if *update {
		if err := os.WriteFile(file, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(embedded, want) {
		t.Errorf("%s is not what the test derives: run go test -run '^%s$' -update in its package's directory\nwant:\n%s", file, t.Name(), want)
	}
}
