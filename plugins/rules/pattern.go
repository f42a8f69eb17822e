package rules

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// pattern is a compiled rule pattern: one matcher per word, and whether a final
// "*" word lets any further words follow.
type pattern struct {
	words []wordMatcher
	rest  bool
	// bare: the program word names no directory, so that (for deny and ask rules)
	// it also matches a program named by a path with that basename.
	bare bool
}

// wordMatcher matches one word: one of several literal alternatives, or a glob.
type wordMatcher struct {
	alts []string // literal alternatives; nil for a glob
	glob []string // the literal pieces around each unquoted "*"; nil for a literal
}

func (m wordMatcher) match(s string) bool {
	if m.glob == nil {
		for _, a := range m.alts {
			if a == s {
				return true
			}
		}
		return false
	}
	return globMatch(m.glob, s)
}

// globMatch matches s against pieces joined by "*" (any run of characters).
func globMatch(pieces []string, s string) bool {
	first, last := pieces[0], pieces[len(pieces)-1]
	if !strings.HasPrefix(s, first) {
		return false
	}
	s = s[len(first):]
	for _, p := range pieces[1 : len(pieces)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, last)
}

// any reports whether m is a lone "*", matching every word.
func (m wordMatcher) any() bool {
	return len(m.glob) == 2 && m.glob[0] == "" && m.glob[1] == ""
}

func (m wordMatcher) hasSlash() bool {
	for _, list := range [][]string{m.alts, m.glob} {
		for _, s := range list {
			if strings.Contains(s, "/") {
				return true
			}
		}
	}
	return false
}

// match reports whether ws (a simple command's words) matches. A non-literal word
// matches no pattern word — only a final "*" covers it — except that, when strict
// (a deny or ask rule), a "*" word matches it too. byBase lets a bare program word
// match the basename of a program named by a path.
func (p *pattern) match(ws []Word, byBase, strict bool) bool {
	n := len(p.words)
	if len(ws) < n || (!p.rest && len(ws) != n) {
		return false
	}
	for i, m := range p.words {
		w := ws[i]
		if !w.Literal {
			if strict && m.any() {
				continue
			}
			return false
		}
		t := w.Text
		if i == 0 && byBase && p.bare && strings.Contains(t, "/") {
			t = path.Base(t)
		}
		if !m.match(t) {
			return false
		}
	}
	return true
}

// compilePattern reads a pattern written as shell words.
func compilePattern(src string) (pattern, error) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		return pattern{}, fmt.Errorf("does not parse as shell words: %v", err)
	}
	if len(f.Stmts) == 0 {
		return pattern{}, errors.New("is empty")
	}
	st := f.Stmts[0]
	call, ok := st.Cmd.(*syntax.CallExpr)
	if len(f.Stmts) > 1 || !ok || st.Negated || st.Background || st.Coprocess || len(st.Redirs) > 0 {
		return pattern{}, errors.New("is not one simple command: each simple command is judged on its own, so a pattern has no ;, &&, ||, |, &, redirection, ! or compound command")
	}
	if len(call.Assigns) > 0 {
		return pattern{}, errors.New("starts with an assignment (NAME=value): assignments are removed before matching, so a pattern starts with the program")
	}
	if len(call.Args) == 0 {
		return pattern{}, errors.New("is empty")
	}
	var p pattern
	for i, w := range call.Args {
		m, star, err := compileWord(w)
		if err != nil {
			return pattern{}, fmt.Errorf("word %d (%s): %v", i+1, src[w.Pos().Offset():w.End().Offset()], err)
		}
		if star && i == len(call.Args)-1 {
			p.rest = true
			break
		}
		p.words = append(p.words, m)
	}
	p.bare = len(p.words) > 0 && !p.words[0].hasSlash()
	return p, nil
}

// compileWord reads one pattern word; star reports a word that is exactly an
// unquoted "*".
func compileWord(w *syntax.Word) (m wordMatcher, star bool, err error) {
	var cur strings.Builder
	var pieces []string
	globbed := false
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			s := p.Value
			for i := 0; i < len(s); i++ {
				switch {
				case s[i] == '\\' && i+1 < len(s):
					i++
					cur.WriteByte(s[i])
				case s[i] == '*':
					pieces = append(pieces, cur.String())
					cur.Reset()
					globbed = true
				default:
					cur.WriteByte(s[i])
				}
			}
		case *syntax.SglQuoted:
			if p.Dollar {
				cur.WriteString(ansiC(p.Value))
			} else {
				cur.WriteString(p.Value)
			}
		case *syntax.DblQuoted:
			for _, dp := range p.Parts {
				l, ok := dp.(*syntax.Lit)
				if !ok {
					return m, false, errors.New("is not literal: a pattern has no expansions ($, backquotes); quote it to match it as written")
				}
				cur.WriteString(unescapeDouble(l.Value))
			}
		case *syntax.ExtGlob:
			return m, false, errors.New("is an extended glob: only * globs in a pattern; quote it to match it as written")
		default:
			return m, false, errors.New("is not literal: a pattern has no expansions ($, backquotes); quote it to match it as written")
		}
	}
	if !globbed {
		return wordMatcher{alts: []string{cur.String()}}, false, nil
	}
	pieces = append(pieces, cur.String())
	star = len(pieces) == 2 && pieces[0] == "" && pieces[1] == "" && len(w.Parts) == 1
	return wordMatcher{glob: pieces}, star, nil
}
