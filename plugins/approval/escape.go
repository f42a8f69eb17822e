package approval

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// What a prompt shows is only what a terminal (or a client rendering the text) draws as
// itself: every character it would act on, or that draws as nothing but blank space, is
// written as an escape, so no part of a request can be hidden, overwritten, reordered
// or pushed out of sight by padding.
//
// The escapes are for the eye, not a reversible encoding (a backslash is kept as is):
//
//	\r                 carriage return
//	\x00 … \x1f, \x7f  the other C0 controls (newline and tab stay literal), DEL
//	\xHH               a byte that is not UTF-8
//	\u0085, \u00a0 …   any other character of Unicode's Cc, Cf, Zs (but the ASCII space),
//	                   Zl or Zp categories, and the blank glyphs U+115F, U+1160, U+2800,
//	                   U+3164, U+FFA0; \U000e0001 above U+FFFF

// blankGlyphs are letters and symbols that draw as nothing: Hangul fillers and the empty
// Braille pattern.
var blankGlyphs = [...]rune{0x115f, 0x1160, 0x2800, 0x3164, 0xffa0}

// escapedAs returns how a prompt writes the character r (size bytes, UTF-8-decoded from
// a string starting with b), or "" when it is shown as itself. Newline and tab are shown
// as themselves here; fields that must stay one line escape them on their own.
func escapedAs(r rune, size int, b byte) string {
	switch {
	case r == utf8.RuneError && size <= 1:
		return fmt.Sprintf(`\x%02x`, b)
	case r == '\n' || r == '\t' || r >= ' ' && r < 0x7f:
		return ""
	case r == '\r':
		return `\r`
	case r < ' ' || r == 0x7f:
		return fmt.Sprintf(`\x%02x`, r)
	case r < 0x80:
		return ""
	case unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zs, unicode.Zl, unicode.Zp) || isBlankGlyph(r):
		if r > 0xffff {
			return fmt.Sprintf(`\U%08x`, r)
		}
		return fmt.Sprintf(`\u%04x`, r)
	}
	return ""
}

func isBlankGlyph(r rune) bool {
	for _, g := range blankGlyphs {
		if r == g {
			return true
		}
	}
	return false
}

// plainASCII reports whether s needs no escape at all: printable ASCII, newlines and
// tabs only.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\n' && c != '\t' || c >= 0x7f {
			return false
		}
	}
	return true
}

// EscapeForTerminal returns s as a terminal may show it without acting on any of it:
// every character a prompt escapes (see above) is written as its escape; newlines, tabs
// and everything else stay as they are. Nothing is collapsed or cut: it is for output
// the user asked to see (`dsh call` on a terminal), where a title change, a hidden
// span or a cursor move must not happen but every character counts.
func EscapeForTerminal(s string) string {
	if plainASCII(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if e := escapedAs(r, size, s[i]); e != "" {
			b.WriteString(e)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
