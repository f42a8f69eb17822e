package rules

import (
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Word is one word of a simple command as it is judged.
type Word struct {
	// Text is the word after quote removal when Literal, else its source text.
	Text string
	// Literal is false when bash expands the word at run time — a parameter, a
	// substitution, arithmetic, a process substitution, a glob, a brace
	// expansion — so that its value (and even how many words it becomes) is not
	// known statically.
	Literal bool
}

// literalWord evaluates w as bash would, when it can be evaluated statically.
// zsh marks the word non-literal at an unquoted "(" too (zsh glob qualifiers can
// run code).
func literalWord(w *syntax.Word, zsh bool) (string, bool) {
	if len(w.Parts) == 1 {
		if l, ok := w.Parts[0].(*syntax.Lit); ok && plain(l.Value) {
			return l.Value, true
		}
	}
	var b strings.Builder
	var g globState
	for i, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			if !g.unquoted(&b, p.Value, zsh, i == 0) {
				return "", false
			}
		case *syntax.SglQuoted:
			if p.Dollar {
				b.WriteString(ansiC(p.Value))
			} else {
				b.WriteString(p.Value)
			}
		case *syntax.DblQuoted:
			for _, dp := range p.Parts {
				l, ok := dp.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(unescapeDouble(l.Value))
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// plain reports whether an unquoted literal has none of the characters that
// escape, expand or (in zsh) qualify.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\', '*', '?', '[', ']', '{', '}', '(', '=':
			return false
		}
	}
	return true
}

// globState follows the unquoted characters of one word, across its parts, for
// the expansions bash performs on them: globs (*, ?, [...]) and braces
// ({a,b}, {1..3}).
type globState struct {
	bracket   bool // an unquoted [ was seen
	brace     bool // an unquoted { was seen
	braceList bool // ... and after it an unquoted , or ..
}

// unquoted writes the value of an unquoted literal (backslash escapes removed) and
// reports false when the literal makes the word an expansion.
func (g *globState) unquoted(b *strings.Builder, s string, zsh, first bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\':
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					b.WriteByte(s[i])
				}
				continue
			}
		case '*', '?':
			return false
		case '[':
			g.bracket = true
		case ']':
			if g.bracket {
				return false
			}
		case '{':
			g.brace, g.braceList = true, false
		case ',':
			g.braceList = g.braceList || g.brace
		case '.':
			if g.brace && i+1 < len(s) && s[i+1] == '.' {
				g.braceList = true
			}
		case '}':
			if g.brace && g.braceList {
				return false
			}
		case '(':
			if zsh {
				return false
			}
		case '=':
			if zsh && first && i == 0 {
				return false // =cmd expands to the command's path
			}
		}
		b.WriteByte(c)
	}
	return true
}

// unescapeDouble removes the backslashes that are special inside double quotes.
func unescapeDouble(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '$', '`', '"', '\\':
				i++
			case '\n':
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unescapeHeredoc removes the backslashes that are special in an unquoted
// here-document body.
func unescapeHeredoc(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '$', '`', '\\':
				i++
			case '\n':
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ansiC decodes the body of a $'...' string. expand.Format is printf: its %
// directives are escaped first, and the value ends at a NUL as bash's does. Each
// call has its own Config: Format writes to the one it is given (nil is shared).
func ansiC(s string) string {
	v, _, err := expand.Format(&expand.Config{}, strings.ReplaceAll(s, "%", "%%"), nil)
	if err != nil {
		return s
	}
	v, _, _ = strings.Cut(v, "\x00")
	return v
}

// isName reports whether s is a valid shell variable name.
func isName(s string) bool { return syntax.ValidName(s) }
