package rules

import (
	"fmt"
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Bash evaluates the values of some variables as code: a name's value in
// arithmetic is itself arithmetic, and an array subscript in it runs command
// substitutions (x='a[$(cmd)]'; echo $((x)) runs cmd). The same holds for a name
// given to read, unset, printf -v, test -v, declare and the like, and for ${!x}.
// This file finds those places; each is checked unless its names are known to hold
// numbers.

// sensitiveVars change which program a command name runs, or run code of their own.
var sensitiveVars = map[string]bool{
	"PATH": true, "BASH_ENV": true, "ENV": true, "PS4": true, "PROMPT_COMMAND": true,
	"SHELLOPTS": true, "BASHOPTS": true, "BASH_CMDS": true, "BASH_ALIASES": true,
	"LD_PRELOAD": true, "LD_LIBRARY_PATH": true, "LD_AUDIT": true, "GCONV_PATH": true,
}

func sensitive(name string) bool { return sensitiveVars[name] }

func sensitiveWhy(name string) string {
	return fmt.Sprintf("it assigns %s, which changes what the commands after it run", name)
}

// nameArg reports whether a word given to a builtin as a variable name is a plain
// name, or a name with a number (or @, *) as subscript.
func nameArg(w Word) bool {
	if !w.Literal {
		return false
	}
	n, sub, ok := strings.Cut(w.Text, "[")
	if !ok {
		return isName(n)
	}
	sub, closed := strings.CutSuffix(sub, "]")
	return isName(n) && closed && (sub == "@" || sub == "*" || isNumber(sub))
}

func nameWhy(builtin string) string {
	return fmt.Sprintf("%s evaluates a variable name that is not known statically, and a subscript in it can run commands", builtin)
}

var numberRE = regexp.MustCompile(`^(-?[0-9]+|0[xX][0-9a-fA-F]+|[0-9]+#[0-9a-zA-Z@_]+)$`)

func isNumber(s string) bool { return numberRE.MatchString(s) }

// nameBuiltins check the names given to the builtins that take variable names;
// each returns the bad part and why, or "" when all is literal.
var nameBuiltins = map[string]func(args []Word) (string, string){
	"read":    namesAfterOptions("read", "dinNptu", "a"),
	"unset":   namesAfterOptions("unset", "", ""),
	"wait":    namesAfterOptions("wait", "", "p"),
	"getopts": getoptsName,
	"printf":  printfName,
	"test":    testNames,
	"[":       testNames,
	"declare": declNames("declare"), "typeset": declNames("typeset"), "local": declNames("local"),
	"export": declNames("export"), "readonly": declNames("readonly"),
}

// namesAfterOptions checks a builtin whose operands are names (when operands) and
// whose options nameOpts take a name; valueOpts take another value.
func namesAfterOptions(builtin, valueOpts, nameOpts string) func([]Word) (string, string) {
	operands := builtin != "wait"
	return func(args []Word) (string, string) {
		for i := 0; i < len(args); i++ {
			a := args[i]
			if !a.Literal {
				return a.Text, nameWhy(builtin)
			}
			v := a.Text
			if len(v) < 2 || v[0] != '-' {
				if operands && !nameArg(a) {
					return v, nameWhy(builtin)
				}
				continue
			}
			for j := 1; j < len(v); j++ {
				isName := strings.IndexByte(nameOpts, v[j]) >= 0
				if !isName && strings.IndexByte(valueOpts, v[j]) < 0 {
					continue
				}
				val := Word{Text: v[j+1:], Literal: true}
				if val.Text == "" && i+1 < len(args) {
					i++
					val = args[i]
				}
				if isName && !nameArg(val) || !val.Literal {
					return val.Text, nameWhy(builtin)
				}
				break
			}
		}
		return "", ""
	}
}

func getoptsName(args []Word) (string, string) {
	for i, a := range args {
		if !a.Literal && i <= 1 {
			return a.Text, nameWhy("getopts")
		}
	}
	if len(args) > 1 && !nameArg(args[1]) {
		return args[1].Text, nameWhy("getopts")
	}
	return "", ""
}

// printfName checks printf -v NAME; a format that is not literal could be -v.
func printfName(args []Word) (string, string) {
	if len(args) == 0 {
		return "", ""
	}
	a := args[0]
	if !a.Literal {
		return a.Text, "printf's first argument is not literal and could be -v, which evaluates a variable name"
	}
	if v, ok := strings.CutPrefix(a.Text, "-v"); ok {
		name := Word{Text: v, Literal: true}
		if v == "" && len(args) > 1 {
			name = args[1]
		}
		if !nameArg(name) {
			return name.Text, nameWhy("printf -v")
		}
	}
	return "", ""
}

// testBinary are the words that may follow an operand of test.
var testBinary = map[string]bool{
	"=": true, "==": true, "!=": true, "<": true, ">": true, "-eq": true, "-ne": true, "-lt": true,
	"-le": true, "-gt": true, "-ge": true, "-nt": true, "-ot": true, "-ef": true, "-a": true,
	"-o": true, "]": true, ")": true, "=~": true,
}

// testNames checks test -v NAME, and an operand that is not literal where an
// operator (such as -v) would be.
func testNames(args []Word) (string, string) {
	for i, a := range args {
		if a.Literal && a.Text == "-v" && i+1 < len(args) && !nameArg(args[i+1]) {
			return args[i+1].Text, nameWhy("test -v")
		}
		if !a.Literal && i+1 < len(args) && !(args[i+1].Literal && testBinary[args[i+1].Text]) {
			return a.Text, "an operand of test that is not literal stands where an operator (such as -v, which evaluates a name) would be"
		}
	}
	return "", ""
}

// declNames checks declare and its kin run as a plain command (quoted, or after
// builtin or command), where bash does not parse them as declarations.
func declNames(builtin string) func([]Word) (string, string) {
	return func(args []Word) (string, string) {
		for _, a := range args {
			if !a.Literal {
				return a.Text, nameWhy(builtin)
			}
			if part, why := declArg(builtin, a.Text); why != "" {
				return part, why
			}
		}
		return "", ""
	}
}

// declArg checks one argument of a declaration: an option, NAME=VALUE or NAME.
func declArg(builtin, v string) (string, string) {
	if strings.HasPrefix(v, "-") || strings.HasPrefix(v, "+") {
		if builtin != "export" && builtin != "readonly" && strings.ContainsAny(v[1:], "ni") {
			return v, fmt.Sprintf("%s %s makes later assignments evaluate names or arithmetic", builtin, v)
		}
		return "", ""
	}
	n, _, hasValue := strings.Cut(v, "=")
	if hasValue && sensitive(n) {
		return v, sensitiveWhy(n)
	}
	if !nameArg(Word{Text: strings.TrimSuffix(n, "+"), Literal: true}) {
		return v, nameWhy(builtin)
	}
	return "", ""
}

// decl checks a declaration clause (declare, local, export, readonly, typeset).
func (s *scope) decl(d *syntax.DeclClause) {
	builtin := d.Variant.Value
	for _, a := range d.Args {
		if a.Name != nil {
			if a.Naked {
				continue
			}
			s.assign(a)
			continue
		}
		if a.Value == nil {
			continue
		}
		v, ok := literalWord(a.Value, s.zsh())
		why := nameWhy(builtin)
		if ok {
			_, why = declArg(builtin, v)
		}
		if builtin == "nameref" {
			why = "nameref makes a name stand for another"
		}
		if why != "" {
			s.j.unchecked(s.depth, s.text(d), s.text(a.Value), why)
		}
	}
}
