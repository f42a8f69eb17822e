package approval

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// How a prompt shows one field of a request (the command, the justification, the
// workspace): escaped (escapedAs), its padding collapsed, and cut at shownLimit.
//
// The limit counts the characters shown — after escaping and collapsing — so that it
// bounds what the user must read: 2,000 characters of "\u2800" escapes would otherwise
// fill 150 rows of a terminal. An escape, a run or a padding marker is never split. What
// is cut is counted in characters of the field as given (each byte that is not UTF-8 is
// one), and said after the shown text: "… (<N> more characters)".

const (
	// shownLimit is how many characters of one field a prompt shows.
	shownLimit = 2000
	// minRun is the shortest run of one escaped character shown once, with its count
	// ("\u00a0×3200").
	minRun = 4
	// maxBlankLines is the longest run of blank lines a command shows as lines; a
	// longer one is shown as "[N blank lines]".
	maxBlankLines = 2
	// maxSpaces is the longest run of spaces and tabs a command shows as is; a longer
	// one is shown as "[N spaces]".
	maxSpaces = 16
)

// layout is how a field's whitespace is shown.
type layout int

const (
	// block keeps lines (a command): runs of blank lines and of spaces are collapsed.
	block layout = iota
	// sentence is one line (a justification, a reason): each run of spaces, tabs and
	// newlines is one space; leading and trailing ones are dropped.
	sentence
	// exact is one line shown character for character (a path, a name): newline and
	// tab are escaped too (\n, \t).
	exact
)

// show returns field as a prompt shows it under l.
func show(field string, l layout) string {
	w := &shownText{limit: shownLimit}
	rest := w.walk(field, l)
	if rest == len(field) {
		return w.b.String()
	}
	return w.b.String() + "… (" + strconv.Itoa(utf8.RuneCountInString(field[rest:])) + " more characters)"
}

// shownText is the text shown of one field so far.
type shownText struct {
	b     strings.Builder
	n     int // characters in b
	limit int
}

// add appends piece when it fits within the limit, and reports whether it did.
func (w *shownText) add(piece string) bool {
	n := utf8.RuneCountInString(piece)
	if w.n+n > w.limit {
		return false
	}
	w.b.WriteString(piece)
	w.n += n
	return true
}

// walk adds field piece by piece and returns the offset of the first piece that did not
// fit (len(field) when all of it is shown).
func (w *shownText) walk(field string, l layout) int {
	lineStart := l == block
	for i := 0; i < len(field); {
		if lineStart {
			lineStart = false
			if n, end := blankLines(field, i); n > maxBlankLines {
				if !w.add(fmt.Sprintf("[%d blank lines]", n)) {
					return i
				}
				i = end
				continue
			}
		}
		piece, next := w.next(field, i, l)
		if piece != "" && !w.add(piece) {
			return i
		}
		lineStart = l == block && field[i] == '\n'
		i = next
	}
	return len(field)
}

// next returns the piece that shows field[i:] next, and where the field goes on after it.
func (w *shownText) next(field string, i int, l layout) (string, int) {
	c := field[i]
	if l != exact && (c == ' ' || c == '\t' || l == sentence && c == '\n') {
		j := i
		for j < len(field) && (field[j] == ' ' || field[j] == '\t' || l == sentence && field[j] == '\n') {
			j++
		}
		switch {
		case l == sentence && (w.n == 0 || j == len(field)):
			return "", j // leading or trailing
		case l == sentence:
			return " ", j
		case j-i > maxSpaces:
			return fmt.Sprintf("[%d spaces]", j-i), j
		}
		return field[i:j], j
	}
	r, size := utf8.DecodeRuneInString(field[i:])
	e := escapedAs(r, size, c)
	switch {
	case l == exact && c == '\n':
		e = `\n`
	case l == exact && c == '\t':
		e = `\t`
	}
	if e == "" {
		return field[i : i+size], i + size
	}
	j, n := i+size, 1
	for j+size <= len(field) && field[j:j+size] == field[i:i+size] {
		if r2, s2 := utf8.DecodeRuneInString(field[j:]); r2 != r || s2 != size {
			break // an invalid byte that starts a longer character here
		}
		j, n = j+size, n+1
	}
	if n < minRun {
		return e, i + size
	}
	return e + "×" + strconv.Itoa(n), j
}

// blankLines counts the blank lines (nothing but spaces and tabs) that start at offset
// i, a line start; end is where the last of them ends (at its newline, or the end).
func blankLines(s string, i int) (n, end int) {
	for {
		j := i
		for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
			j++
		}
		if j < len(s) && s[j] != '\n' {
			return n, end
		}
		n, end = n+1, j
		if j == len(s) {
			return n, end
		}
		i = j + 1
	}
}
