package cli

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// A token file's lines are "<token>" or "<token> <role>"; blank lines do not count; a
// line of more words is a usage error naming the line and not the token.
func TestReadTokenFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(file, []byte("  alone \n\nwith-role\treader\n  spaced   writer  \n"), 0o600)
	lines, err := readTokenFile(file)
	want := []tokenLine{{token: "alone", line: 1}, {token: "with-role", role: "reader", line: 3}, {token: "spaced", role: "writer", line: 4}}
	if err != nil || !reflect.DeepEqual(lines, want) {
		t.Errorf("lines %+v, %v", lines, err)
	}
	os.WriteFile(file, []byte("ok\nsecret-token reader extra\n"), 0o600)
	_, err = readTokenFile(file)
	if want := "--token-file " + file + `: line 2: want "<token>" or "<token> <role>", got 3 words`; err == nil || err.Error() != want || !errors.As(err, new(usageError)) {
		t.Errorf("three words: %v, want %q", err, want)
	}
}
