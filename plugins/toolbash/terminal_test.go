package toolbash

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// Each decision of the terminal normalisation, by example.
func TestPlainTextDecisions(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"progress bar", "10%\r50%\r100%\n", "100%\n"},
		{"crlf", "one\r\ntwo\r\n", "one\ntwo\n"},
		{"the tail of a longer version stays", "abcdef\r12\n", "12cdef\n"},
		{"erase to the end", "downloading 100 files\r\x1b[Kdone\n", "done\n"},
		{"erase the line, then write at the cursor", "abc\x1b[2Kx\n", "   x\n"},
		{"erase to the start", "abcdef\x1b[3D\x1b[1K\n", "    ef\n"},
		{"erase characters", "abcdef\r\x1b[2X\n", "  cdef\n"},
		{"delete characters", "abcd\x1b[2D\x1b[P\n", "abd\n"},
		{"to column 1", "50%\x1b[1G100%\n", "100%\n"},
		{"to a column", "abcdef\x1b[3GX\n", "abXdef\n"},
		{"a move stops at the line's end", "ab\x1b[5Cx\x1b[99Gy\n", "abxy\n"},
		{"backspace moves back", "ab\bc\n", "ac\n"},
		{"backspace stops at the start", "\b\bab\n", "ab\n"},
		{"echoed erase", "hix\b \b\n", "hi\n"},
		{"trailing spaces of a finished line", "done   \npadded    \t\n", "done\npadded    \t\n"},
		{"the unfinished line keeps them", "Name: ", "Name: "},
		{"SGR", "\x1b[1;31mred\x1b[0m \x1b[38;5;208mor\x1b[m\n", "red or\n"},
		{"private modes", "\x1b[?25l\x1b[?2004hx\x1b[?1049l\n", "x\n"},
		{"moves across rows are removed", "a\n\x1b[1A\x1b[2Kb\x1b[H\x1b[2J\x1b[5;1Hc\n", "a\nbc\n"},
		{"OSC ended by BEL", "\x1b]2;TITLE\x07text\n", "text\n"},
		{"OSC ended by ST", "\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\\n", "link\n"},
		{"OSC with newlines", "\x1b]0;a\nb\x07c\n", "c\n"},
		{"DCS", "\x1bPq#0;2;0;0;0#0~~@@\x1b\\after\n", "after\n"},
		{"SOS, PM, APC", "\x1bXsos\x1b\\\x1b^pm\x1b\\\x1b_apc\x07still\x1b\\x\n", "x\n"},
		{"an ESC ends a string and starts a sequence", "\x1b]0;t\x1b[31mred\n", "red\n"},
		{"two-byte sequences", "\x1b7\x1b8\x1b=\x1b>\x1bM\x1bcx\n", "x\n"},
		{"intermediates", "\x1b(B\x1b)0\x1b#8x\n", "x\n"},
		{"ESC E and ESC D end a line", "a\x1bEb\x1bDc", "a\nb\nc"},
		{"8-bit CSI", "\u009b31mred\u009b0m\n", "red\n"},
		{"8-bit OSC, ST", "\u009d0;title\u009cok\n", "ok\n"},
		{"8-bit DCS", "\u0090q\u009cok\n", "ok\n"},
		{"NEL, IND", "a\u0085b\u0084c", "a\nb\nc"},
		{"other C1", "a\u0080\u008d\u009ab\n", "ab\n"},
		{"CAN cancels", "\x1b[31\x18x\n", "x\n"},
		{"SUB cancels a string", "\x1b]0;t\x1ax\n", "x\n"},
		{"controls inside a CSI act", "\x1b[3\r1mX\n", "X\n"},
		{"vertical tab, form feed", "a\vb\fc", "a\nb\nc"},
		{"tab kept, BEL NUL DEL dropped", "a\tb\x07\x00\x7fc\n", "a\tbc\n"},
		{"ESC before a non-ASCII character", "\x1bé\n", "é\n"},
		{"not UTF-8", "a\xffb\xe2\x82c\n", "a\uFFFDb\uFFFD\uFFFDc\n"},
		{"an incomplete character at the end", "ok\xe2\x82", "ok\uFFFD\uFFFD"},
		{"an unfinished sequence at the end", "ok\x1b[3", "ok"},
		{"an unfinished string at the end", "ok\x1b]0;never ended", "ok"},
		{"a huge parameter", "ab\x1b[99999999999999999999Dc\n", "cb\n"},
		{"parameters too long to hold: removed, not acted on", "ab\x1b[" + strings.Repeat("1;", 20) + "Dc\n", "abc\n"},
		{"wide characters", "héllo 世界 🙂\r\n", "héllo 世界 🙂\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := plainText([]byte(tc.in)); got != tc.want {
				t.Fatalf("plainText(%q) = %q, want %q", tc.in, got, tc.want)
			}
			checkChunked(t, []byte(tc.in))
		})
	}
}

// checkChunked: every split of raw into two pieces, and byte-by-byte feeding, give the
// whole's text.
func checkChunked(t *testing.T, raw []byte) {
	t.Helper()
	whole := plainText(raw)
	for cut := 0; cut <= len(raw); cut++ {
		var tt terminalText
		if got := tt.Feed(raw[:cut]) + tt.Feed(raw[cut:]) + tt.End(); got != whole {
			t.Fatalf("cut at %d of %q: %q, whole %q", cut, raw, got, whole)
		}
	}
	var tt terminalText
	var b strings.Builder
	for i := range raw {
		b.WriteString(tt.Feed(raw[i : i+1]))
	}
	if got := b.String() + tt.End(); got != whole {
		t.Fatalf("byte by byte %q: %q, whole %q", raw, got, whole)
	}
}

// Feed returns finished lines as they finish; Line shows the unfinished one, as it
// stands (a prompt waiting for its answer).
func TestTerminalTextIncremental(t *testing.T) {
	var tt terminalText
	for i, s := range []struct{ in, done, line string }{
		{"\x1b[?2004h\x1b]0;user@host\x07Name: ", "", "Name: "},
		{"A", "", "Name: A"},
		{"da\r", "", "Name: Ada"},
		{"\nhi Ada\r", "Name: Ada\n", "hi Ada"},
		{"\n 10%\r", "hi Ada\n", " 10%"},
		{"100%\r\x1b", "", "100%"},       // an ESC, its sequence to come
		{"[K\x1b[32", "", ""},            // erased to the end; a sequence to finish
		{"mdone\xe2\x9c", "", "done"},    // a character to finish
		{"\x93\r\n", "done\u2713\n", ""}, // U+2713 is e2 9c 93
	} {
		if got := tt.Feed([]byte(s.in)); got != s.done {
			t.Fatalf("step %d: Feed(%q) = %q, want %q", i, s.in, got, s.done)
		}
		if got := tt.Line(); got != s.line {
			t.Fatalf("step %d: Line() = %q, want %q", i, got, s.line)
		}
	}
	if got := tt.End(); got != "" {
		t.Fatalf("End() = %q", got)
	}
}

// A line too long to hold is passed on before it ends; "\r" rewrites its last piece.
func TestTerminalTextLongLine(t *testing.T) {
	var tt terminalText
	head := strings.Repeat("a", maxLineCells)
	if got := tt.Feed([]byte(head)); got != "" {
		t.Fatalf("a line of %d characters was passed on early", len(got))
	}
	if got := tt.Feed([]byte("bcdef")); got != head {
		t.Fatalf("the head of a long line was held back: %d characters passed on", len(got))
	}
	if got := tt.Feed([]byte("\rX\n")) + tt.End(); got != "Xcdef\n" {
		t.Fatalf("the rewrite of a long line's last piece: %q", got)
	}
}

// Real terminal output (captured from a pty with `script`, see testdata): coloured
// `ls` gives the text of plain `ls`; progress bars give their last version.
func TestPlainTextOfCapturedOutput(t *testing.T) {
	color := readTestdata(t, "ls-color.raw")
	plain := readTestdata(t, "ls-plain.raw")
	if !bytes.Contains(color, []byte("\x1b[01;34m")) || !bytes.Contains(plain, []byte("\r\n")) {
		t.Fatal("testdata is not terminal output")
	}
	if got, want := plainText(color), strings.ReplaceAll(string(plain), "\r\n", "\n"); got != want {
		t.Fatalf("coloured ls:\n%s\n--- want:\n%s", got, want)
	}
	checkChunked(t, color)

	progress := readTestdata(t, "progress.raw")
	want := "downloading 100%\nReceiving objects: 100%, done.\nok\n"
	if got := plainText(progress); got != want {
		t.Fatalf("progress:\n%q\n--- want:\n%q", got, want)
	}
	checkChunked(t, progress)
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The same on this host, now: `ls --color=always` through a real pty gives the text of
// `ls --color=never` through one.
func TestPlainTextOfALivePty(t *testing.T) {
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("script (util-linux) is not installed")
	}
	dir := t.TempDir()
	for _, d := range []string{"dir", "sub"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"plain.txt", "with space", "run.sh"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("missing", filepath.Join(dir, "broken")); err != nil {
		t.Fatal(err)
	}
	run := func(command string) []byte {
		cmd := exec.Command("script", "-qc", command, "/dev/null")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "COLUMNS=80", "LS_COLORS=di=01;34:ln=01;36:or=40;31;01:ex=01;32")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", command, err)
		}
		return out
	}
	// -T 0: no tabs, which ls uses between columns only when it does not colour.
	color := run("ls --color=always -C -T 0; ls --color=always -l --time-style=+-")
	plain := run("ls --color=never -C -T 0; ls --color=never -l --time-style=+-")
	if !bytes.Contains(color, []byte("\x1b[")) || !bytes.Contains(plain, []byte("\r\n")) {
		t.Fatalf("not terminal output: %q", color)
	}
	if got, want := plainText(color), strings.ReplaceAll(string(plain), "\r\n", "\n"); got != want {
		t.Fatalf("coloured ls:\n%s\n--- want:\n%s", got, want)
	}
	bar := run(`for i in 0 25 50 75 100; do printf '\r[%-20s] %3d%%' "$(printf '#%.0s' $(seq 0 $((i / 5))))" $i; done; echo`)
	if got, want := plainText(bar), "[#####################] 100%\n"; got != want {
		t.Fatalf("progress bar %q: %q, want %q", bar, got, want)
	}
}

// FuzzTerminalText: whatever the output and however it is cut into pieces, no panic;
// the text is UTF-8 and holds no ESC, no "\r" and no other control but newline and tab;
// it has at most one character per input byte at every step; what is held back stays
// bounded; and pieces give the whole's text.
func FuzzTerminalText(f *testing.F) {
	for _, seed := range []string{
		"10%\r50%\r100%\n", "\x1b[1;31mred\x1b[0m\r\n", "\x1b]2;t\x07\x1b]8;;u\x1b\\l\x1b]8;;\x1b\\",
		"\x1bPq\x1b\\\u009b2K\u009d0;x\u009c", "ab\bc\x1b[2D\x1b[P\x1b[1K\x1b[3G", "\xe2\x82\xac\xff\xc2",
		"\x1b[?2004h$ echo hix\b \b\r\n", "\x1b[99999999999999999999C\x1b(B\x1b#8\x18\x1a",
	} {
		f.Add([]byte(seed), []byte{1, 3, 7})
	}
	f.Add(readTestdata(f, "ls-color.raw"), []byte{17, 200, 5})
	f.Add(readTestdata(f, "progress.raw"), []byte{0, 1, 2, 40})
	f.Fuzz(func(t *testing.T, raw, cuts []byte) {
		whole := plainText(raw)
		var tt terminalText
		var b strings.Builder
		fed := 0
		for i := 0; fed < len(raw); i++ {
			n := len(raw) - fed
			if i < len(cuts) {
				n = min(int(cuts[i]), n)
			}
			b.WriteString(tt.Feed(raw[fed : fed+n]))
			fed += n
			if c := utf8.RuneCountInString(b.String()); c > fed {
				t.Fatalf("%d characters out of %d bytes", c, fed)
			}
			if len(tt.partial) >= utf8.UTFMax || len(tt.params) > maxParams || len(tt.line) > maxLineCells {
				t.Fatalf("held back: %d bytes of a character, %d of parameters, %d cells", len(tt.partial), len(tt.params), len(tt.line))
			}
			checkText(t, tt.Line())
		}
		got := b.String() + tt.End()
		if got != whole {
			t.Fatalf("in pieces %v: %q, whole %q", cuts, got, whole)
		}
		checkText(t, got)
		if c := utf8.RuneCountInString(got); c > len(raw) {
			t.Fatalf("%d characters out of %d bytes", c, len(raw))
		}
	})
}

// checkText fails t when s is not UTF-8 or holds a control other than newline and tab.
func checkText(t *testing.T, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Fatalf("not UTF-8: %q", s)
	}
	for _, r := range s {
		if r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r <= 0x9f {
			t.Fatalf("%U in %q", r, s)
		}
	}
}
