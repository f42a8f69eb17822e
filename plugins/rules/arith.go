package rules

import (
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// names is what a script's assignments say about its variables.
type names struct {
	numeric map[string]bool // name → every assignment found gives it a number
	dynamic bool            // the script can assign names it does not show (eval, source, declare "$x")
}

// numericVars are set by bash to numbers.
var numericVars = map[string]bool{
	"RANDOM": true, "SRANDOM": true, "LINENO": true, "SECONDS": true, "BASHPID": true, "PPID": true,
	"UID": true, "EUID": true, "EPOCHSECONDS": true, "OPTIND": true,
}

// safe reports whether name holds a number wherever it is read.
func (n *names) safe(name string) bool {
	if n.dynamic {
		return false
	}
	v, assigned := n.numeric[name]
	if !assigned {
		return numericVars[name]
	}
	return v
}

func (n *names) set(name string, numeric bool) {
	if old, ok := n.numeric[name]; ok && !old {
		return
	}
	n.numeric[name] = numeric
}

// scanNames finds every assignment of a script.
func scanNames(f *syntax.File) names {
	n := names{numeric: map[string]bool{}}
	syntax.Walk(f, func(node syntax.Node) bool {
		switch x := node.(type) {
		case *syntax.Assign:
			switch {
			case x.Name == nil:
				if x.Value != nil {
					if v, ok := literalWord(x.Value, false); !ok || !strings.HasPrefix(v, "-") {
						n.dynamic = true
					}
				}
			case !x.Naked:
				n.set(x.Name.Value, x.Index == nil && x.Array == nil && numericWord(x.Value))
			}
		case *syntax.BinaryArithm:
			if assignOp(x.Op) {
				n.arithAssign(x.X)
			}
		case *syntax.UnaryArithm:
			if x.Op == syntax.Inc || x.Op == syntax.Dec {
				n.arithAssign(x.X)
			}
		case *syntax.WordIter:
			all := x.InPos.IsValid()
			for _, w := range x.Items {
				all = all && numericWord(w)
			}
			n.set(x.Name.Value, all)
		case *syntax.ParamExp:
			if x.Exp != nil && x.Param != nil && (x.Exp.Op == syntax.AssignUnset || x.Exp.Op == syntax.AssignUnsetOrNull) {
				n.set(x.Param.Value, false)
			}
		case *syntax.CoprocClause:
			if x.Name != nil {
				if v, ok := literalWord(x.Name, false); ok {
					n.set(v, false)
				}
			}
		case *syntax.CallExpr:
			n.call(x)
		}
		return true
	})
	return n
}

// call notes the names a command may assign: any argument that is a name (read x,
// printf -v x, mapfile x, getopts o x), and everything after eval or source.
func (n *names) call(c *syntax.CallExpr) {
	for i, w := range c.Args {
		v, ok := literalWord(w, false)
		if !ok {
			continue
		}
		if i == 0 {
			switch program(Word{Text: v, Literal: true}) {
			case "eval", "source", ".", "declare", "typeset", "local", "export", "readonly", "let", "alias", "trap":
				n.dynamic = true
			}
			continue
		}
		v = strings.TrimPrefix(v, "-v")
		name, _, _ := strings.Cut(v, "[")
		name, _, _ = strings.Cut(name, "=")
		if isName(name) {
			n.set(name, false)
		}
	}
}

func (n *names) arithAssign(x syntax.ArithmExpr) {
	if w, ok := x.(*syntax.Word); ok {
		if v := w.Lit(); isName(v) {
			n.set(v, true)
		}
	}
}

func assignOp(op syntax.BinAritOperator) bool {
	switch op {
	case syntax.Assgn, syntax.AddAssgn, syntax.SubAssgn, syntax.MulAssgn, syntax.QuoAssgn, syntax.RemAssgn,
		syntax.AndAssgn, syntax.OrAssgn, syntax.XorAssgn, syntax.ShlAssgn, syntax.ShrAssgn:
		return true
	}
	return false
}

// numericWord reports whether an assigned value is a number: digits, or arithmetic.
func numericWord(w *syntax.Word) bool {
	if w == nil {
		return true
	}
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if !isNumber(p.Value) {
				return false
			}
		case *syntax.ArithmExp:
		default:
			return false
		}
	}
	return true
}

func arithTest(op syntax.BinTestOperator) bool {
	switch op {
	case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
		return true
	}
	return false
}

// arith checks an arithmetic expression (root is where it stands).
func (s *scope) arith(x syntax.ArithmExpr, root syntax.Node) {
	if bad := s.arithBad(x); bad != "" {
		s.j.unchecked(s.depth, s.text(root), s.text(root), fmt.Sprintf("arithmetic evaluates %s, whose value is not known statically, and a value can run commands (a[$(…)])", bad))
	}
}

// arithOperand checks an operand of [[ … -eq … ]], which bash evaluates as
// arithmetic.
func (s *scope) arithOperand(x syntax.TestExpr, root syntax.Node) {
	if w, ok := x.(*syntax.Word); ok {
		s.arith(w, root)
	}
}

// arithBad returns the first operand whose value is not known to be a number.
func (s *scope) arithBad(x syntax.ArithmExpr) string {
	switch x := x.(type) {
	case *syntax.BinaryArithm:
		if b := s.arithBad(x.X); b != "" {
			return b
		}
		return s.arithBad(x.Y)
	case *syntax.UnaryArithm:
		return s.arithBad(x.X)
	case *syntax.ParenArithm:
		return s.arithBad(x.X)
	case *syntax.FlagsArithm:
		if x.X != nil {
			return s.arithBad(x.X)
		}
	case *syntax.Word:
		if v := x.Lit(); v != "" {
			if isNumber(v) || (isName(v) && s.safe(v)) {
				return ""
			}
			return v
		}
		if !s.numericParts(x.Parts) {
			return s.text(x)
		}
	}
	return ""
}

// numericParts reports whether word parts in arithmetic yield numbers only.
func (s *scope) numericParts(parts []syntax.WordPart) bool {
	for _, p := range parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if !isNumber(p.Value) {
				return false
			}
		case *syntax.ArithmExp:
		case *syntax.DblQuoted:
			if !s.numericParts(p.Parts) {
				return false
			}
		case *syntax.ParamExp:
			if !s.numericParam(p) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func (s *scope) numericParam(p *syntax.ParamExp) bool {
	if p.Param == nil || p.Excl || p.Slice != nil || p.Repl != nil || p.Exp != nil || p.Flags != nil || p.NestedParam != nil {
		return false
	}
	if p.Length {
		return true
	}
	if p.Index != nil {
		return false
	}
	switch v := p.Param.Value; v {
	case "#", "?", "$", "!":
		return true
	default:
		return isName(v) && s.safe(v)
	}
}

// param checks a parameter expansion: its subscript and slice are arithmetic,
// ${!x} and ${x@P} evaluate the value, and zsh's (e) flag evaluates it as code.
func (s *scope) param(p *syntax.ParamExp) {
	if p.Index != nil {
		if w, ok := p.Index.(*syntax.Word); !ok || (w.Lit() != "@" && w.Lit() != "*") {
			s.arith(p.Index, p)
		}
	}
	if p.Slice != nil {
		for _, x := range []syntax.ArithmExpr{p.Slice.Offset, p.Slice.Length} {
			if x != nil {
				s.arith(x, p)
			}
		}
	}
	listing := p.Names != 0 || p.Index != nil
	switch {
	case p.Excl && !listing:
		s.j.unchecked(s.depth, s.text(p), s.text(p), "${!name} evaluates the value of name as a variable name, and a subscript in it can run commands")
	case p.Exp != nil && p.Exp.Op == syntax.OtherParamOps && p.Exp.Word != nil && strings.Contains(p.Exp.Word.Lit(), "P"):
		s.j.unchecked(s.depth, s.text(p), s.text(p), "${name@P} expands the value as a prompt, which runs the command substitutions in it")
	case p.Flags != nil && s.zsh() && strings.ContainsAny(p.Flags.Value, "e"):
		s.j.unchecked(s.depth, s.text(p), s.text(p), "zsh's (e) flag evaluates the value as code")
	}
}
