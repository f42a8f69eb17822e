package rules

import (
	"errors"
	"fmt"

	"mvdan.cc/sh/v3/syntax"
)

// maxDepth bounds how deeply carried scripts (bash -c inside eval inside …) are
// followed; a deeper one is unchecked.
const maxDepth = 8

// judge collects the judged commands of one call.
type judge struct {
	p    *Policy
	cmds []Command
}

func (j *judge) add(c Command, r *rule) {
	j.p.decide(&c, r)
	j.cmds = append(j.cmds, c)
}

// unchecked records a part that cannot be judged statically.
func (j *judge) unchecked(depth int, text, part, why string) {
	j.add(Command{Depth: depth, Text: text, Part: part, Unchecked: why}, nil)
}

// script judges every simple command of a bash (or zsh, ksh) script.
func (j *judge) script(src string, depth int, lang syntax.LangVariant) {
	if depth > maxDepth {
		j.unchecked(depth, src, src, fmt.Sprintf("scripts are carried more than %d deep", maxDepth))
		return
	}
	f, err := parse(src, lang)
	if err != nil {
		j.unchecked(depth, src, src, "it does not parse: "+err.Error())
		j.prefix(src, err, depth, lang)
		return
	}
	s := &scope{j: j, src: src, depth: depth, lang: lang, file: f}
	syntax.Walk(f, s.visit)
}

// prefix judges what parses before a parse error, so that deny and ask rules still
// apply to it (the unparsable command is at least ask anyway).
func (j *judge) prefix(src string, err error, depth int, lang syntax.LangVariant) {
	var pe syntax.ParseError
	if !errors.As(err, &pe) {
		return
	}
	off := int(pe.Pos.Offset())
	if off <= 0 || off >= len(src) {
		return
	}
	head := src[:off]
	f, err := parse(head, lang)
	if err != nil {
		return
	}
	s := &scope{j: j, src: head, depth: depth, lang: lang, file: f}
	syntax.Walk(f, s.visit)
}

// scope is one script being walked.
type scope struct {
	j     *judge
	src   string
	depth int
	lang  syntax.LangVariant
	file  *syntax.File
	names *names                 // what the assignments say, found when first needed
	timed map[*syntax.Stmt]timed // statements under bash's time keyword
}

// timed is the time keyword in front of a simple command: its words and where it
// starts.
type timed struct {
	words []Word
	start int
}

// safe reports whether a variable holds a number wherever the script reads it.
func (s *scope) safe(name string) bool {
	if s.names == nil {
		n := scanNames(s.file)
		s.names = &n
	}
	return s.names.safe(name)
}

func (s *scope) zsh() bool { return s.lang == syntax.LangZsh }

// text is a node's source text.
func (s *scope) text(n syntax.Node) string {
	return s.slice(int(n.Pos().Offset()), int(n.End().Offset()))
}

func (s *scope) slice(a, b int) string {
	if a < 0 || b > len(s.src) || a > b {
		return ""
	}
	return s.src[a:b]
}

// word evaluates one word of the script.
func (s *scope) word(w *syntax.Word) Word {
	if v, ok := literalWord(w, s.zsh()); ok {
		return Word{Text: v, Literal: true}
	}
	return Word{Text: s.text(w)}
}

func (s *scope) words(ws []*syntax.Word) []Word {
	out := make([]Word, len(ws))
	for i, w := range ws {
		out[i] = s.word(w)
	}
	return out
}

// visit is called for every node of the script: simple commands are judged, and
// the places where bash evaluates values as code are checked.
func (s *scope) visit(n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.Stmt:
		if c, ok := n.Cmd.(*syntax.CallExpr); ok {
			s.call(n, c)
		}
	case *syntax.TimeClause:
		if n.Stmt != nil {
			ws := []Word{{Text: "time", Literal: true}}
			if n.PosixFormat {
				ws = append(ws, Word{Text: "-p", Literal: true})
			}
			if s.timed == nil {
				s.timed = map[*syntax.Stmt]timed{}
			}
			s.timed[n.Stmt] = timed{words: ws, start: int(n.Pos().Offset())}
		}
	case *syntax.DeclClause:
		s.decl(n)
	case *syntax.ArithmExp:
		s.arith(n.X, n)
	case *syntax.ArithmCmd:
		s.arith(n.X, n)
	case *syntax.CStyleLoop:
		for _, x := range []syntax.ArithmExpr{n.Init, n.Cond, n.Post} {
			if x != nil {
				s.arith(x, n)
			}
		}
	case *syntax.LetClause:
		for _, x := range n.Exprs {
			s.arith(x, n)
		}
	case *syntax.ParamExp:
		s.param(n)
	case *syntax.Assign:
		if n.Index != nil {
			s.arith(n.Index, n)
		}
	case *syntax.ArrayElem:
		if n.Index != nil {
			s.arith(n.Index, n)
		}
	case *syntax.BinaryTest:
		if arithTest(n.Op) {
			s.arithOperand(n.X, n)
			s.arithOperand(n.Y, n)
		}
	case *syntax.UnaryTest:
		if n.Op == syntax.TsVarSet || n.Op == syntax.TsRefVar {
			if w, ok := n.X.(*syntax.Word); !ok || !nameArg(s.word(w)) {
				s.j.unchecked(s.depth, s.text(n), s.text(n.X), "[[ -v ]] evaluates a name that is not known statically, and a subscript in it can run commands")
			}
		}
	}
	return true
}

// call judges a simple command statement.
func (s *scope) call(st *syntax.Stmt, c *syntax.CallExpr) {
	for _, a := range c.Assigns {
		s.assign(a)
	}
	if len(c.Args) == 0 {
		return // assignments only: nothing runs but what their values substitute
	}
	var ws []Word
	start := int(c.Pos().Offset())
	if t, ok := s.timed[st]; ok {
		ws, start = append(ws, t.words...), t.start
	}
	ws = append(ws, s.words(c.Args)...)
	text := s.slice(start, int(c.End().Offset()))
	s.simple(ws, text, st, s.depth)
}

// assign checks an assignment's name.
func (s *scope) assign(a *syntax.Assign) {
	if a.Name != nil && sensitive(a.Name.Value) {
		s.j.unchecked(s.depth, s.text(a), s.text(a), sensitiveWhy(a.Name.Value))
	}
}
