package shell_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/shell"
)

func TestMarkers(t *testing.T) {
	if got := shell.ExitCodeMarker(3); got != "[exit code: 3]" {
		t.Errorf("ExitCodeMarker(3) = %q", got)
	}
	if got := shell.ExitCodeMarker(-1); got != "[exit code: -1]" {
		t.Errorf("ExitCodeMarker(-1) = %q", got)
	}
	if got := shell.SignalMarker("SIGTERM"); got != "[killed by signal: SIGTERM]" {
		t.Errorf("SignalMarker = %q", got)
	}
}

func TestParseExitStatus(t *testing.T) {
	code := func(n int) *int { return &n }
	for _, c := range []struct {
		text, body string
		code       *int
		signal     string
	}{
		// The bash tool's renderings.
		{"hello\n", "hello\n", code(0), ""},
		{"(no output)", "(no output)", code(0), ""},
		// The body excludes the marker and the newline that introduces it.
		{"failing\n[exit code: 3]", "failing", code(3), ""},
		{"(no output)\n[timed out after 100ms]\n[killed by signal: SIGTERM]", "(no output)\n[timed out after 100ms]", nil, "SIGTERM"},
		// The marker needs its leading newline.
		{"[exit code: 3]", "[exit code: 3]", code(0), ""},
		{"[killed by signal: SIGKILL]", "[killed by signal: SIGKILL]", code(0), ""},
		{"\n[exit code: 3]", "", code(3), ""},
		{"out\n\n[exit code: 1]", "out\n", code(1), ""},
		// Signal wins only when it is the last line; exit code likewise.
		{"a\n[killed by signal: SIGTERM]\n[exit code: 2]", "a\n[killed by signal: SIGTERM]", code(2), ""},
		{"a\n[exit code: 2]\n[killed by signal: SIGINT]", "a\n[exit code: 2]", nil, "SIGINT"},
		// Not markers: trailing text, malformed numbers, empty signal, brackets inside.
		{"x\n[exit code: 3] ", "x\n[exit code: 3] ", code(0), ""},
		{"x\n[exit code: 3]\n", "x\n[exit code: 3]\n", code(0), ""},
		{"x\n[exit code: +3]", "x\n[exit code: +3]", code(0), ""},
		{"x\n[exit code: 03]", "x\n[exit code: 03]", code(0), ""},
		{"x\n[exit code: 3.0]", "x\n[exit code: 3.0]", code(0), ""},
		{"x\n[exit code: ]", "x\n[exit code: ]", code(0), ""},
		{"x\n[exit code: 99999999999999999999]", "x\n[exit code: 99999999999999999999]", code(0), ""},
		{"x\n[exit code:3]", "x\n[exit code:3]", code(0), ""},
		{"x\n[killed by signal: ]", "x\n[killed by signal: ]", code(0), ""},
		{"x\n[killed by signal: a]b]", "x\n[killed by signal: a]b]", code(0), ""},
		{"x\n[exit code: -1]", "x", code(-1), ""},
		{"", "", code(0), ""},
		{"]", "]", code(0), ""},
		{"\n[", "\n[", code(0), ""},
		{"\n[]", "\n[]", code(0), ""},
	} {
		body, gotCode, signal := shell.ParseExitStatus(c.text)
		if body != c.body || signal != c.signal || (gotCode == nil) != (c.code == nil) || (gotCode != nil && *gotCode != *c.code) {
			g := "nil"
			if gotCode != nil {
				g = strconv.Itoa(*gotCode)
			}
			t.Errorf("ParseExitStatus(%q) = (%q, %s, %q)", c.text, body, g, signal)
		}
	}
}

// FuzzParseExitStatus checks the contract's invariants on arbitrary text and the round
// trip of a body followed by each marker.
func FuzzParseExitStatus(f *testing.F) {
	for _, s := range []string{"", "hello\n", "failing\n[exit code: 3]", "(no output)\n[timed out after 100ms]\n[killed by signal: SIGTERM]",
		"\n[exit code: -7]", "[exit code: 1]", "x\n[killed by signal: ]", "\n[\n[exit code: 2]"} {
		f.Add(s, 3, "SIGTERM")
	}
	f.Fuzz(func(t *testing.T, text string, n int, sig string) {
		body, code, signal := shell.ParseExitStatus(text)
		switch {
		case signal != "":
			if code != nil {
				t.Fatalf("%q: both a signal %q and a code %d", text, signal, *code)
			}
			if text != body+"\n"+shell.SignalMarker(signal) {
				t.Fatalf("%q: body %q + signal %q does not rebuild the text", text, body, signal)
			}
			if strings.ContainsAny(signal, "[]\n") {
				t.Fatalf("%q: signal %q", text, signal)
			}
		case code == nil:
			t.Fatalf("%q: neither a code nor a signal", text)
		case body != text:
			if text != body+"\n"+shell.ExitCodeMarker(*code) {
				t.Fatalf("%q: body %q + code %d does not rebuild the text", text, body, *code)
			}
		default:
			if *code != 0 {
				t.Fatalf("%q: no marker but code %d", text, *code)
			}
		}

		// Round trips: any body followed by a well-formed marker parses back exactly.
		b, c, s := shell.ParseExitStatus(text + "\n" + shell.ExitCodeMarker(n))
		if b != text || c == nil || *c != n || s != "" {
			t.Fatalf("exit round trip of %q, %d: (%q, %v, %q)", text, n, b, c, s)
		}
		if sig != "" && !strings.ContainsAny(sig, "[]\n") {
			b, c, s = shell.ParseExitStatus(text + "\n" + shell.SignalMarker(sig))
			if b != text || c != nil || s != sig {
				t.Fatalf("signal round trip of %q, %q: (%q, %v, %q)", text, sig, b, c, s)
			}
		}
	})
}

func TestModeRank(t *testing.T) {
	for mode, want := range map[string]int{
		shell.ModeReadOnly: 0, shell.ModeWorkspaceWrite: 1, shell.ModeDangerFullAccess: 2, "": -1, "full": -1,
	} {
		if got := shell.ModeRank(mode); got != want {
			t.Errorf("ModeRank(%q) = %d, want %d", mode, got, want)
		}
	}
}
