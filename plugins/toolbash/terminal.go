package toolbash

import (
	"strings"
	"unicode/utf8"
)

// The output of a command run under a terminal, as text: what the terminal would show of
// each line, without the sequences that colour it, move its cursor or set its title.
// Pure, and incremental: output arrives in pieces (a read, a job's buffer), and a
// sequence or a character split between two pieces gives the same text as whole.
//
// What it does, and what it decides where a terminal is more than text:
//   - Escape sequences are removed: CSI (ESC [ … final byte), OSC (ESC ] … up to BEL or
//     ST), DCS, SOS, PM and APC strings (ESC P, X, ^, _ … up to ST), every other ESC
//     sequence (ESC, intermediates, a final byte), and the same introduced by the 8-bit
//     C1 characters (U+009B CSI, U+009D OSC, U+0090 DCS, … U+009C ST) as a UTF-8
//     terminal reads them. CAN and SUB cancel a sequence, as on a terminal.
//   - Each line keeps what a terminal would show at its end: "\r" returns to its start
//     and what follows overwrites it, keeping the tail of a longer earlier version
//     ("abcdef\r12" → "12cdef", as on a terminal; progress bars that shrink erase or
//     pad it themselves). Backspace moves back one character without erasing
//     ("ab\bc" → "ac"; the "\b \b" a terminal echoes for an erased character
//     overwrites it with a space). Erase in line (CSI K: to the end, to the start,
//     all) and erase characters (CSI X) leave spaces, delete characters (CSI P) closes
//     up, moves within the line (CSI C, D, G) move; a move never goes past the line's
//     end (the gap a terminal would show is not made up). Nothing acts across lines:
//     moves to other rows and screen erases are removed, so a full-screen program
//     shows as the lines it wrote.
//   - A line ended by a newline loses its trailing spaces, as a terminal shows none
//     (the spaces of an erase or of padding); the unfinished last line keeps them
//     ("Name: " waits for its answer there).
//   - "\r\n" is "\n" (the terminal's newline); vertical tab, form feed, NEL (U+0085,
//     ESC E) and index (U+0084, ESC D) end a line too. A tab is kept as a tab; BEL, DEL and
//     the other C0 and C1 controls are dropped.
//   - A byte that is not UTF-8 becomes U+FFFD, as a terminal shows it: the text is
//     always UTF-8 and never joins leftover bytes into a character (or a control) the
//     input did not have. One input byte gives at most one character.
//   - A line longer than maxLineCells is passed on in pieces of that size (a terminal
//     wraps it too); "\r" then rewrites only its last piece, as a terminal rewrites
//     only the last row of a wrapped line.
//
// What it holds back is bounded: an incomplete UTF-8 character (at most 3 bytes), the
// parameters of an unfinished CSI sequence (at most maxParams bytes; the rest of a
// sequence and the body of a string are read and dropped, never kept), and the line not
// finished yet (at most maxLineCells characters), which Line shows as it stands.

const (
	// maxLineCells is the longest line held for rewriting.
	maxLineCells = 8192
	// maxParams is how many parameter bytes of a CSI sequence are kept.
	maxParams = 32
)

// seqState is where terminalText is in the grammar of escape sequences.
type seqState uint8

const (
	ground    seqState = iota // text
	escape                    // after ESC
	escInter                  // ESC and intermediate bytes, before the final byte
	csi                       // a control sequence, before its final byte
	str                       // the body of an OSC, DCS, SOS, PM or APC string
	strEscape                 // ESC within a string: ST if "\" follows
)

// terminalText turns a terminal session's output into plain text, piece by piece:
// Feed each piece, Line for the unfinished line, End when the output ends.
type terminalText struct {
	state   seqState
	partial []byte // an incomplete UTF-8 character at the end of the last piece
	params  []byte // of the CSI sequence being read
	private bool   // the CSI sequence has a private marker or intermediate bytes
	osc     bool   // the string is an OSC (BEL ends it too)
	line    []rune // the unfinished line, one character per cell
	cursor  int    // where the next character goes, 0 ≤ cursor ≤ len(line)
	out     strings.Builder
}

// plainText is the text of a whole terminal session's output.
func plainText(raw []byte) string {
	var t terminalText
	return t.Feed(raw) + t.End()
}

// Feed reads the next piece of output and returns the text it finished: whole lines
// (each with its "\n") and the pieces of a line too long to hold.
func (t *terminalText) Feed(piece []byte) string {
	buf := piece
	if len(t.partial) > 0 {
		buf = append(t.partial, piece...)
		t.partial = nil
	}
	for i := 0; i < len(buf); {
		if c := buf[i]; c < utf8.RuneSelf {
			t.read(rune(c))
			i++
			continue
		}
		if !utf8.FullRune(buf[i:]) {
			t.partial = append([]byte(nil), buf[i:]...)
			break
		}
		r, size := utf8.DecodeRune(buf[i:])
		t.read(r)
		i += size
	}
	return t.flush()
}

// Line is the unfinished line as it stands; later output may still rewrite it.
func (t *terminalText) Line() string { return cellText(t.line, false) }

// End ends the output and returns the rest: the unfinished line as it stands (an
// incomplete character shows as U+FFFD; an unfinished sequence is dropped).
func (t *terminalText) End() string {
	for range t.partial {
		t.read(utf8.RuneError) // each byte of it is not UTF-8
	}
	t.partial = nil
	t.state = ground
	t.out.WriteString(cellText(t.line, false))
	t.line, t.cursor = t.line[:0], 0
	return t.flush()
}

func (t *terminalText) flush() string {
	s := t.out.String()
	t.out.Reset()
	return s
}

// read takes one character of output.
func (t *terminalText) read(r rune) {
	switch {
	case r == 0x18 || r == 0x1a: // CAN, SUB: cancel a sequence
		t.state = ground
		return
	case r == 0x1b:
		if t.state == str {
			t.state = strEscape
		} else {
			t.state = escape
		}
		return
	case r >= 0x80 && r <= 0x9f:
		t.c1(r)
		return
	}
	switch t.state {
	case ground:
		t.text(r)
	case escape, escInter:
		t.escapeByte(r)
	case csi:
		t.csiByte(r)
	case str:
		if r == 0x07 && t.osc {
			t.state = ground
		}
	case strEscape:
		// ESC \ is ST; any other ESC sequence ends the string and starts itself.
		if r == '\\' {
			t.state = ground
		} else {
			t.state = escape
			t.escapeByte(r)
		}
	}
}

// c1 acts on an 8-bit C1 control, in any state.
func (t *terminalText) c1(r rune) {
	switch r {
	case 0x9b:
		t.startCSI()
	case 0x9d, 0x90, 0x98, 0x9e, 0x9f:
		t.state, t.osc = str, r == 0x9d
	case 0x84, 0x85: // IND, NEL
		t.state = ground
		t.newline()
	default: // ST ends a string; the others do nothing here
		t.state = ground
	}
}

func (t *terminalText) startCSI() {
	t.state, t.params, t.private = csi, t.params[:0], false
}

// escapeByte reads the character after ESC (or after its intermediate bytes).
func (t *terminalText) escapeByte(r rune) {
	switch {
	case r < 0x20:
		t.control(r) // executed within a sequence, as on a terminal
	case r >= 0x20 && r <= 0x2f:
		t.state = escInter
	case t.state == escInter && r >= 0x30 && r <= 0x7e:
		t.state = ground
	case r == '[':
		t.startCSI()
	case r == ']' || r == 'P' || r == 'X' || r == '^' || r == '_':
		t.state, t.osc = str, r == ']'
	case r == 'E' || r == 'D': // NEL, IND
		t.state = ground
		t.newline()
	case r >= 0x30 && r <= 0x7e:
		t.state = ground
	case r == 0x7f:
	default: // not a sequence after all: the character is text
		t.state = ground
		t.text(r)
	}
}

// csiByte reads one character of a control sequence.
func (t *terminalText) csiByte(r rune) {
	switch {
	case r < 0x20:
		t.control(r)
	case r >= '0' && r <= ';':
		if len(t.params) < maxParams {
			t.params = append(t.params, byte(r))
		} else {
			t.private = true // too long to be one this acts on
		}
	case r >= 0x3c && r <= 0x3f, r >= 0x20 && r <= 0x2f:
		t.private = true
	case r >= 0x40 && r <= 0x7e:
		t.state = ground
		if !t.private {
			t.sequence(byte(r))
		}
	case r == 0x7f:
	default: // a character a sequence cannot hold: the sequence is read on, not acted on
		t.private = true
	}
}

// sequence acts on a finished CSI sequence with the final byte final, when it is one
// that changes the line; every other one is only removed.
func (t *terminalText) sequence(final byte) {
	n := t.param()
	switch final {
	case 'K': // erase in line
		switch n {
		case 0:
			t.line = t.line[:t.cursor]
		case 1:
			t.erase(0, t.cursor+1)
		case 2:
			t.erase(0, len(t.line))
		}
	case 'X': // erase characters
		t.erase(t.cursor, t.cursor+max(n, 1))
	case 'P': // delete characters
		end := min(t.cursor+max(n, 1), len(t.line))
		t.line = append(t.line[:t.cursor], t.line[end:]...)
	case 'C': // forward
		t.cursor = min(t.cursor+max(n, 1), len(t.line))
	case 'D': // back
		t.cursor = max(t.cursor-max(n, 1), 0)
	case 'G': // to a column
		t.cursor = min(max(n, 1)-1, len(t.line))
	}
}

// param is the first parameter of the sequence: 0 when absent, at most maxLineCells.
func (t *terminalText) param() int {
	n := 0
	for _, c := range t.params {
		if c < '0' || c > '9' {
			break
		}
		n = min(n*10+int(c-'0'), maxLineCells)
	}
	return n
}

// erase clears the cells [from, to) of the line that exist.
func (t *terminalText) erase(from, to int) {
	for i := from; i < min(to, len(t.line)); i++ {
		t.line[i] = ' '
	}
}

// text takes one character outside any sequence.
func (t *terminalText) text(r rune) {
	if r < 0x20 || r == 0x7f {
		t.control(r)
		return
	}
	t.put(r)
}

// put writes r at the cursor.
func (t *terminalText) put(r rune) {
	if t.cursor == len(t.line) && len(t.line) == maxLineCells {
		// Too long to hold: pass the line on, as a terminal wraps it.
		t.out.WriteString(cellText(t.line, false))
		t.line, t.cursor = t.line[:0], 0
	}
	if t.cursor < len(t.line) {
		t.line[t.cursor] = r
	} else {
		t.line = append(t.line, r)
	}
	t.cursor++
}

// control acts on a C0 control; the ones not named here do nothing.
func (t *terminalText) control(r rune) {
	switch r {
	case '\r':
		t.cursor = 0
	case '\n', '\v', '\f':
		t.newline()
	case '\b':
		t.cursor = max(t.cursor-1, 0)
	case '\t':
		t.put('\t')
	}
}

// newline finishes the line.
func (t *terminalText) newline() {
	t.out.WriteString(cellText(t.line, true))
	t.out.WriteByte('\n')
	t.line, t.cursor = t.line[:0], 0
}

// cellText writes cells as text; a finished line loses its trailing spaces.
func cellText(cells []rune, finished bool) string {
	for finished && len(cells) > 0 && cells[len(cells)-1] == ' ' {
		cells = cells[:len(cells)-1]
	}
	return string(cells)
}
