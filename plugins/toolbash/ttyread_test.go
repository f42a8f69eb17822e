package toolbash

import (
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/shell"
)

// A terminal's output read piece by piece: each read shows what is new, a line shown
// unfinished is not shown again when it finishes, a rewritten one is shown in its new
// version, and the lossy notice follows a lossy read.
func TestTTYReader(t *testing.T) {
	var r ttyReader
	for _, step := range []struct {
		delta string
		final bool
		want  string
	}{
		{"Name: ", false, "Name: "},
		{"", false, ""},
		{"Ada\r\nhi Ada\r\n", false, "Ada\nhi Ada\n"},
		{"> ", false, "> "},
		{"\r\n", false, "\n"}, // an empty answer: the finished line lost its trailing space
		{"10%", false, "10%"},
		{"\r50%", false, "50%"}, // rewritten: the new version
		{"\r100%\r\n\x1b[1mbye\x1b[0m", false, "100%\nbye"},
		{"!", true, "!"},
	} {
		if got := r.read(step.delta, step.final); got != step.want {
			t.Errorf("read(%q) = %q, want %q", step.delta, got, step.want)
		}
	}
	lossy := (&ttyReader{}).render(shell.ProcessRead{Delta: "tail\r\n", Lossy: true, StdoutSpillPath: "/s"}, false)
	if lossy != "tail\n[some output was dropped from memory; full output: /s]" {
		t.Errorf("lossy read %q", lossy)
	}
	var none *ttyReader
	if got := none.render(shell.ProcessRead{Delta: "a\r\n"}, false); got != "a\r\n" {
		t.Errorf("no terminal: %q", got)
	}
}

func TestLastLine(t *testing.T) {
	for in, want := range map[string]string{
		"":                         "",
		"one\ntwo\n":               "two",
		"one\n\n  \n":              "one",
		"\x1b[32mok\x1b[0m\r\n":    "ok",
		"a\nbuild 10%\rbuild 90%":  "build 90%",
		strings.Repeat("x\n", 3):   "x",
		"  indented line   \n \n ": "indented line",
	} {
		if got := lastLine([]byte(in)); got != want {
			t.Errorf("lastLine(%q) = %q, want %q", in, got, want)
		}
	}
}
