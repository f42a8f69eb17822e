package rules

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// simple judges one simple command given its words: the wrappers are removed, what
// the command carries is found, and the rules are matched.
func (s *scope) simple(ws []Word, text string, st *syntax.Stmt, depth int) {
	u := unwrap(ws)
	cmd := u.layers[len(u.layers)-1]
	c := Command{Depth: depth, Text: text, Words: cmd}
	var k carried
	switch {
	case u.stuck != nil:
		c.Part, c.Unchecked = u.stuck.part, u.stuck.why
	case !cmd[0].Literal:
		c.Part, c.Unchecked = cmd[0].Text, "the program is not a literal word, so what runs is decided at run time"
	default:
		k = s.inspect(cmd, st)
		c.Carrier = k.carrier && !strings.Contains(cmd[0].Text, "/")
		c.Part, c.Unchecked = k.part, k.why
	}
	if k.none {
		return
	}
	allowOK := c.Unchecked == "" && !c.Carrier && !u.viaPath
	r, at := s.j.p.match(u.layers, allowOK)
	if r != nil {
		c.Words = u.layers[at]
	}
	s.j.add(c, r)
	for _, sc := range k.scripts {
		s.j.script(sc.src, depth+1, sc.lang)
	}
	for _, inner := range k.commands {
		s.simple(inner, renderWords(inner), nil, depth+1)
	}
}

// program is the name a program word is known by: its basename.
func program(w Word) string {
	if !w.Literal || w.Text == "" {
		return ""
	}
	return path.Base(w.Text)
}
