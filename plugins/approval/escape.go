package approval

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// escapeControls makes s safe to show to a user who approves it: every character that
// a terminal (or a client rendering the text) would act on rather than show is written
// as an escape, so no part of a command can be hidden, overwritten or reordered. C0
// controls other than newline and tab become \r, \x1b, \x07…; DEL becomes \x7f; C1
// controls become \u0085, \u009b…; the bidirectional overrides and isolates (which
// reorder what is displayed) become \u202e…; bytes that are not UTF-8 become \xHH.
// A backslash is kept as is: the escapes are for the eye, not a reversible encoding.
func escapeControls(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\n' && c != '\t' || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 && r != '\n' && r != '\t', r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
