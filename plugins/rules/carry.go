package rules

import (
	"fmt"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// carried is what inspecting a simple command found.
type carried struct {
	none      bool   // nothing runs (exec with only redirections)
	carrier   bool   // it only carries what it runs: allow rules and the default do not apply to it
	part, why string // a part that cannot be judged statically
	scripts   []script
	commands  [][]Word // commands it runs itself (find -exec)
}

// script is a script a command runs, to be judged like the command line.
type script struct {
	src  string
	lang syntax.LangVariant
}

func uncheck(part, why string) carried { return carried{part: part, why: why} }

// inspect looks at what a command (its wrappers removed, its program literal) runs
// besides itself, and at the builtins that evaluate names or code.
func (s *scope) inspect(cmd []Word, st *syntax.Stmt) carried {
	name := program(cmd[0])
	args := cmd[1:]
	if lang, ok := shells[name]; ok {
		return s.shell(name, lang, args, st)
	}
	switch name {
	case "exec":
		return carried{none: len(args) == 0}
	case "eval":
		return evalScript(args)
	case "source", ".":
		return s.source(name, args, st)
	case "trap":
		return trapScript(args)
	case "alias":
		return aliasScripts(args)
	case "fc":
		return uncheck(cmd[0].Text, "fc runs commands from the shell's history, which are not known statically")
	case "hash":
		for _, a := range args {
			if !a.Literal || (strings.HasPrefix(a.Text, "-") && strings.Contains(a.Text, "p")) {
				return uncheck(a.Text, "hash -p makes a name run another program")
			}
		}
	case "mapfile", "readarray", "compgen", "complete":
		return callbackScript(name, args)
	case "find":
		return findCommands(args)
	case "su", "runuser", "script":
		return commandOption(name, args)
	case "let":
		return uncheck(cmd[0].Text, "let evaluates arithmetic given as words, which is not checked here")
	}
	if k, ok := nameBuiltins[name]; ok {
		if part, why := k(args); why != "" {
			return uncheck(part, why)
		}
	}
	return carried{}
}

// shells run a script given with -c, in a file, or on their standard input; the
// value is the dialect their script is read in.
var shells = map[string]syntax.LangVariant{
	"bash": syntax.LangBash, "sh": syntax.LangBash, "dash": syntax.LangBash, "ash": syntax.LangBash,
	"zsh": syntax.LangZsh, "ksh": syntax.LangMirBSDKorn, "mksh": syntax.LangMirBSDKorn,
}

// shell finds the script a shell runs: -c's argument, its standard input (a
// here-document or here-string), or a file (then the command is matched as it is).
func (s *scope) shell(name string, lang syntax.LangVariant, args []Word, st *syntax.Stmt) carried {
	cflag, stdin := false, false
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if !a.Literal {
			if cflag {
				break // the script: checked below
			}
			return uncheck(a.Text, fmt.Sprintf("an option of %s is not literal, so the script it runs is not known statically", name))
		}
		v := a.Text
		if v == "--" || v == "-" {
			i++
			break
		}
		if len(v) < 2 || (v[0] != '-' && v[0] != '+') {
			break
		}
		if strings.HasPrefix(v, "--") {
			switch v {
			case "--rcfile", "--init-file":
				i++
			case "--help", "--version":
				return carried{}
			}
			continue
		}
		for _, c := range v[1:] {
			switch c {
			case 'c':
				cflag = cflag || v[0] == '-'
			case 's':
				stdin = true
			case 'o', 'O':
				i++ // the option's name
			}
		}
	}
	switch {
	case cflag:
		if i >= len(args) {
			return carried{carrier: true} // bash -c without a script runs nothing
		}
		if !args[i].Literal {
			return uncheck(args[i].Text, fmt.Sprintf("the script of %s -c is not literal", name))
		}
		return carried{carrier: true, scripts: []script{{args[i].Text, lang}}}
	case stdin || i >= len(args):
		return s.input(name, lang, 0, st)
	case !args[i].Literal:
		return uncheck(args[i].Text, fmt.Sprintf("%s runs a script file that is not known statically", name))
	}
	if fd, ok := fdPath(args[i].Text); ok {
		return s.input(name, lang, fd, st)
	}
	return carried{} // a script file: the command is matched as written
}

// source judges `source file` as written, but a file that is not literal, or that
// is a file descriptor, is what it reads.
func (s *scope) source(name string, args []Word, st *syntax.Stmt) carried {
	if len(args) > 0 && args[0].Literal && args[0].Text == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return carried{}
	}
	if !args[0].Literal {
		return uncheck(args[0].Text, fmt.Sprintf("%s reads a file that is not known statically", name))
	}
	if fd, ok := fdPath(args[0].Text); ok {
		return s.input(name, syntax.LangBash, fd, st)
	}
	return carried{}
}

// fdPath recognises the paths that name a file descriptor.
func fdPath(p string) (int, bool) {
	switch p {
	case "/dev/stdin":
		return 0, true
	case "/dev/stdout":
		return 1, true
	case "/dev/stderr":
		return 2, true
	}
	for _, prefix := range []string{"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"} {
		if n, ok := strings.CutPrefix(p, prefix); ok {
			fd, err := strconv.Atoi(n)
			return fd, err == nil && fd >= 0
		}
	}
	return 0, false
}

// input finds the script a command reads from file descriptor fd: a
// here-document or a here-string of its statement; anything else is not known.
func (s *scope) input(name string, lang syntax.LangVariant, fd int, st *syntax.Stmt) carried {
	var last *syntax.Redirect
	if st != nil {
		for _, r := range st.Redirs {
			if redirFD(r) == fd && reads(r.Op) {
				last = r
			}
		}
	}
	from := "standard input"
	if fd != 0 {
		from = fmt.Sprintf("file descriptor %d", fd)
	}
	why := fmt.Sprintf("%s reads its script from %s, which is not known statically", name, from)
	if last == nil {
		return uncheck(name, why)
	}
	switch last.Op {
	case syntax.Hdoc, syntax.DashHdoc:
		body, ok := heredocBody(last)
		if !ok {
			return uncheck(s.text(last.Hdoc), fmt.Sprintf("the here-document fed to %s expands at run time", name))
		}
		return carried{carrier: true, scripts: []script{{body, lang}}}
	case syntax.WordHdoc:
		v, ok := literalWord(last.Word, s.zsh())
		if !ok {
			return uncheck(s.text(last.Word), fmt.Sprintf("the here-string fed to %s expands at run time", name))
		}
		return carried{carrier: true, scripts: []script{{v + "\n", lang}}}
	}
	return uncheck(s.text(last), why)
}

func redirFD(r *syntax.Redirect) int {
	if r.N == nil {
		switch r.Op {
		case syntax.RdrIn, syntax.RdrInOut, syntax.DplIn, syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
			return 0
		}
		return 1
	}
	n, err := strconv.Atoi(r.N.Value)
	if err != nil {
		return -1
	}
	return n
}

// reads reports whether a redirection gives its file descriptor something to read.
func reads(op syntax.RedirOperator) bool {
	switch op {
	case syntax.RdrIn, syntax.RdrInOut, syntax.DplIn, syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
		return true
	}
	return false
}

// heredocBody is a here-document's text as the reader sees it, when it has no
// expansions: a quoted delimiter keeps the body as written.
func heredocBody(r *syntax.Redirect) (string, bool) {
	if r.Hdoc == nil {
		return "", true
	}
	quoted := false
	for _, p := range r.Word.Parts {
		if l, ok := p.(*syntax.Lit); !ok || strings.Contains(l.Value, `\`) {
			quoted = true
		}
	}
	var b strings.Builder
	for _, p := range r.Hdoc.Parts {
		l, ok := p.(*syntax.Lit)
		if !ok {
			return "", false
		}
		b.WriteString(l.Value)
	}
	if quoted {
		return b.String(), true
	}
	return unescapeHeredoc(b.String()), true
}

// evalScript is the script eval runs: its arguments joined by spaces.
func evalScript(args []Word) carried {
	if len(args) > 0 && args[0].Literal && args[0].Text == "--" {
		args = args[1:]
	}
	parts := make([]string, len(args))
	for i, a := range args {
		if !a.Literal {
			return uncheck(a.Text, "eval runs a script that is not known statically")
		}
		parts[i] = a.Text
	}
	return carried{carrier: true, scripts: []script{{strings.Join(parts, " "), syntax.LangBash}}}
}

// trapScript is the action of trap ACTION SIGNAL...
func trapScript(args []Word) carried {
	if len(args) > 0 && args[0].Literal && args[0].Text == "--" {
		args = args[1:]
	}
	if len(args) < 2 {
		return carried{carrier: true} // trap, trap -p, trap -l, trap SIGNAL: no action
	}
	a := args[0]
	if !a.Literal {
		return uncheck(a.Text, "trap's action is not known statically")
	}
	if a.Text == "-" || a.Text == "-p" || a.Text == "-l" || a.Text == "-P" {
		return carried{carrier: true}
	}
	return carried{carrier: true, scripts: []script{{a.Text, syntax.LangBash}}}
}

// aliasScripts are the values alias NAME=VALUE defines (run where NAME is used
// once aliases are expanded).
func aliasScripts(args []Word) carried {
	k := carried{carrier: true}
	for _, a := range args {
		if !a.Literal {
			return uncheck(a.Text, "alias defines a command that is not known statically")
		}
		if _, v, ok := strings.Cut(a.Text, "="); ok {
			k.scripts = append(k.scripts, script{v, syntax.LangBash})
		}
	}
	return k
}

// callbackScript is the -C command of mapfile, readarray, compgen and complete (run
// with arguments appended); mapfile's array name is checked too.
func callbackScript(name string, args []Word) carried {
	values := "oAGWFCXPS" // compgen, complete
	if name == "mapfile" || name == "readarray" {
		values = "dnOsuCc"
	}
	var k carried
	var operands []Word
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.Literal {
			return uncheck(a.Text, fmt.Sprintf("an argument of %s is not literal, and %s can run a command or evaluate a name", name, name))
		}
		v := a.Text
		if len(v) < 2 || v[0] != '-' || v == "--" {
			operands = append(operands, a)
			continue
		}
		for j := 1; j < len(v); j++ {
			if !strings.ContainsRune(values, rune(v[j])) {
				continue
			}
			val := v[j+1:]
			if val == "" && i+1 < len(args) {
				i++
				if !args[i].Literal {
					return uncheck(args[i].Text, fmt.Sprintf("an argument of %s is not literal, and %s can run a command or evaluate a name", name, name))
				}
				val = args[i].Text
			}
			if v[j] == 'C' {
				k.scripts = append(k.scripts, script{val, syntax.LangBash})
			}
			break
		}
	}
	if values == "dnOsuCc" && len(operands) > 0 {
		if a := operands[len(operands)-1]; !nameArg(a) {
			return uncheck(a.Text, nameWhy(name))
		}
	}
	return k
}

// commandOption is the script given with -c (--command) to su, runuser and
// script, which run it with a shell; the command itself is judged as written.
func commandOption(name string, args []Word) carried {
	var k carried
	for i := 0; i < len(args); i++ {
		a := args[i]
		v, ok := "", false
		switch {
		case !a.Literal:
			return uncheck(a.Text, fmt.Sprintf("an argument of %s is not literal, and %s can run a command (-c)", name, name))
		case a.Text == "-c" || a.Text == "--command":
			if i+1 < len(args) {
				i++
				v, ok = args[i].Text, args[i].Literal
				if !ok {
					return uncheck(v, fmt.Sprintf("the command of %s -c is not literal", name))
				}
			}
		case strings.HasPrefix(a.Text, "--command="):
			v, ok = strings.TrimPrefix(a.Text, "--command="), true
		}
		if ok {
			k.scripts = append(k.scripts, script{v, syntax.LangBash})
		}
	}
	return k
}

// findCommands are the commands find runs with -exec, -execdir, -ok and -okdir; {}
// (the file found) is not literal.
func findCommands(args []Word) carried {
	var k carried
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.Literal {
			for _, b := range args[i+1:] {
				if b.Literal && (b.Text == ";" || b.Text == "+") {
					return uncheck(a.Text, "an argument of find is not literal, and find can run commands (-exec)")
				}
			}
			continue
		}
		switch a.Text {
		case "-exec", "-execdir", "-ok", "-okdir":
		default:
			continue
		}
		var inner []Word
		for i++; i < len(args); i++ {
			b := args[i]
			if b.Literal && (b.Text == ";" || b.Text == "+") {
				break
			}
			if b.Literal && strings.Contains(b.Text, "{}") {
				b = Word{Text: quote(b.Text)}
			}
			inner = append(inner, b)
		}
		if len(inner) > 0 {
			k.commands = append(k.commands, inner)
		}
	}
	return k
}
