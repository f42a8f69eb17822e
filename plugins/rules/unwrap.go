package rules

import (
	"fmt"
	"strings"
)

// unwrapped is a simple command with its wrappers removed, layer by layer.
type unwrapped struct {
	layers  [][]Word // the words as written, then without each wrapper; never empty
	viaPath bool     // a wrapper was named by a path (./sudo may be anything)
	stuck   *stuck   // the wrapped command could not be found
}

// stuck is a part of a command that stops it being judged statically.
type stuck struct{ part, why string }

// maxWrappers bounds the unwrapping (sudo env nice nohup … is finite anyway).
const maxWrappers = 16

// unwrap removes the wrappers in front of a command, repeatedly.
func unwrap(ws []Word) unwrapped {
	u := unwrapped{layers: [][]Word{ws}}
	for range maxWrappers {
		cur := u.layers[len(u.layers)-1]
		name := program(cur[0])
		w, ok := wrappers[name]
		if !ok {
			return u
		}
		inner, st := w.strip(name, cur)
		if st != nil {
			u.stuck = st
			return u
		}
		if len(inner) == 0 {
			return u // the wrapper alone (env, nice): it is the command
		}
		if strings.Contains(cur[0].Text, "/") {
			u.viaPath = true
		}
		u.layers = append(u.layers, inner)
	}
	u.stuck = &stuck{part: u.layers[len(u.layers)-1][0].Text, why: fmt.Sprintf("more than %d wrappers", maxWrappers)}
	return u
}

// Kinds of option.
const (
	optFlag     = iota + 1 // takes no value
	optValue               // takes a value: attached (-uroot, --user=root) or the next word
	optAttached            // takes an optional value, attached only (xargs -i, --replace=R)
	optStop                // the wrapper runs nothing (sudo -l, command -v): it is the command
	optStuck               // the wrapper builds its command in a way not followed (env -S)
)

// wrapper describes a program that runs the command in its arguments.
type wrapper struct {
	short    map[byte]int
	long     map[string]int
	assigns  bool // NAME=VALUE words may come before the command (env, sudo)
	operands int  // words between the options and the command (timeout's duration)
	// then adjusts the command found (xargs appends what it reads); seen holds the
	// options given, by name ("-I", "--replace"), with their values.
	then func(inner []Word, seen map[string]string) []Word
}

// strip returns the command w runs; nil when it runs none.
func (w wrapper) strip(name string, ws []Word) ([]Word, *stuck) {
	seen := map[string]string{}
	i := 1
	for ; i < len(ws); i++ {
		a := ws[i]
		if !a.Literal {
			return nil, &stuck{a.Text, fmt.Sprintf("an argument of %s is not literal, so the command it runs is not known statically", name)}
		}
		v := a.Text
		if w.assigns && isAssignment(v) {
			if n, _, _ := strings.Cut(v, "="); sensitive(n) {
				return nil, &stuck{v, sensitiveWhy(n)}
			}
			continue
		}
		if v == "--" {
			i++
			break
		}
		if v == "-" && name == "env" {
			continue // env - is env -i
		}
		if len(v) < 2 || v[0] != '-' {
			break
		}
		next, st, stop := w.option(name, ws, i, seen)
		if st != nil {
			return nil, st
		}
		if stop {
			return nil, nil
		}
		i = next
	}
	for range w.operands {
		if i >= len(ws) {
			return nil, nil
		}
		if !ws[i].Literal {
			return nil, &stuck{ws[i].Text, fmt.Sprintf("an argument of %s is not literal, so the command it runs is not known statically", name)}
		}
		i++
	}
	inner := ws[min(i, len(ws)):]
	if w.then != nil {
		inner = w.then(inner, seen)
	}
	return inner, nil
}

// option reads the option word ws[i] (and its value); it returns the index of the
// last word it used.
func (w wrapper) option(name string, ws []Word, i int, seen map[string]string) (last int, st *stuck, stop bool) {
	v := ws[i].Text
	unknown := &stuck{v, fmt.Sprintf("%s has an option not known here, so the command it runs is not known statically", name)}
	value := func() (string, *stuck) {
		if i+1 >= len(ws) {
			return "", nil
		}
		i++
		if !ws[i].Literal {
			return "", &stuck{ws[i].Text, fmt.Sprintf("an argument of %s is not literal, so the command it runs is not known statically", name)}
		}
		return ws[i].Text, nil
	}
	if strings.HasPrefix(v, "--") {
		key, val, hasVal := strings.Cut(v[2:], "=")
		switch w.long[key] {
		case optFlag, optAttached:
		case optValue:
			if !hasVal {
				var err *stuck
				if val, err = value(); err != nil {
					return i, err, false
				}
			}
		case optStop:
			return i, nil, true
		case optStuck:
			return i, &stuck{v, fmt.Sprintf("%s %s builds the command in a way not followed here", name, v)}, false
		default:
			return i, unknown, false
		}
		seen["--"+key] = val
		return i, nil, false
	}
	for j := 1; j < len(v); j++ {
		opt := "-" + v[j:j+1]
		switch w.short[v[j]] {
		case optFlag:
			seen[opt] = ""
			continue
		case optValue:
			val := v[j+1:]
			if val == "" {
				var err *stuck
				if val, err = value(); err != nil {
					return i, err, false
				}
			}
			seen[opt] = val
		case optAttached:
			seen[opt] = v[j+1:]
		case optStop:
			return i, nil, true
		case optStuck:
			return i, &stuck{v, fmt.Sprintf("%s %s builds the command in a way not followed here", name, opt)}, false
		default:
			return i, unknown, false
		}
		break
	}
	return i, nil, false
}

// isAssignment reports whether s is NAME=VALUE.
func isAssignment(s string) bool {
	n, _, ok := strings.Cut(s, "=")
	return ok && isName(n)
}

// opts builds an option table from pairs of (letters or comma-separated long
// names, kind).
func opts(pairs ...any) map[string]int {
	m := map[string]int{}
	for i := 0; i+1 < len(pairs); i += 2 {
		for _, k := range strings.Split(pairs[i].(string), ",") {
			if k != "" {
				m[k] = pairs[i+1].(int)
			}
		}
	}
	return m
}

func shortOpts(pairs ...any) map[byte]int {
	m := map[byte]int{}
	for i := 0; i+1 < len(pairs); i += 2 {
		for _, c := range []byte(pairs[i].(string)) {
			m[c] = pairs[i+1].(int)
		}
	}
	return m
}

// wrappers are the programs removed in front of a command, with their options.
var wrappers = map[string]wrapper{
	"env": {
		short:   shortOpts("i0v", optFlag, "uCPa", optValue, "S", optStuck),
		long:    opts("ignore-environment,null,debug,list-signal-handling", optFlag, "unset,chdir,argv0", optValue, "default-signal,ignore-signal,block-signal", optAttached, "split-string", optStuck, "help,version", optStop),
		assigns: true,
	},
	"sudo": {
		short: shortOpts("AbBEHiknNPSs", optFlag, "CDgpRrTtUu", optValue, "ehKlVv", optStop),
		long: opts("askpass,bell,background,preserve-env,set-home,login,reset-timestamp,no-update,non-interactive,preserve-groups,stdin,shell", optFlag,
			"close-from,chdir,group,host,prompt,chroot,role,command-timeout,type,other-user,user", optValue,
			"edit,help,remove-timestamp,list,version,validate", optStop),
		assigns: true,
	},
	"doas":    {short: shortOpts("ns", optFlag, "u", optValue, "CL", optStop)},
	"command": {short: shortOpts("p", optFlag, "vV", optStop)},
	"builtin": {},
	"exec":    {short: shortOpts("cl", optFlag, "a", optValue)},
	"nice": {
		short: shortOpts("0123456789", optFlag, "n", optValue),
		long:  opts("adjustment", optValue, "help,version", optStop),
	},
	"nohup": {long: opts("help,version", optStop)},
	"time": {
		short: shortOpts("pvqa", optFlag, "fo", optValue),
		long:  opts("verbose,quiet,append,portability", optFlag, "format,output", optValue, "help,version", optStop),
	},
	"timeout": {
		short:    shortOpts("v", optFlag, "sk", optValue),
		long:     opts("preserve-status,foreground,verbose", optFlag, "signal,kill-after", optValue, "help,version", optStop),
		operands: 1,
	},
	"stdbuf": {
		short: shortOpts("ioe", optValue),
		long:  opts("input,output,error", optValue, "help,version", optStop),
	},
	"setsid": {
		short: shortOpts("cfw", optFlag),
		long:  opts("ctty,fork,wait", optFlag, "help,version", optStop),
	},
	"ionice": {
		short: shortOpts("t", optFlag, "cn", optValue, "pPuhV", optStop),
		long:  opts("ignore", optFlag, "class,classdata", optValue, "pid,pgid,uid,help,version", optStop),
	},
	"taskset": {
		short:    shortOpts("ac", optFlag, "phV", optStop),
		long:     opts("all-tasks,cpu-list", optFlag, "pid,help,version", optStop),
		operands: 1,
	},
	"chrt": {
		short:    shortOpts("abdefiorRv", optFlag, "TPD", optValue, "mphV", optStop),
		long:     opts("all-tasks,batch,deadline,fifo,idle,other,rr,reset-on-fork,verbose", optFlag, "sched-runtime,sched-period,sched-deadline", optValue, "max,pid,help,version", optStop),
		operands: 1,
	},
	"busybox": {long: opts("list,list-full,help", optStop)},
	"toybox":  {long: opts("help,version", optStop)},
	"xargs": {
		short: shortOpts("0oprtx", optFlag, "adEILnPs", optValue, "eil", optAttached),
		long: opts("null,open-tty,interactive,no-run-if-empty,verbose,exit,show-limits", optFlag,
			"arg-file,delimiter,max-args,max-procs,max-chars,process-slot-var", optValue,
			"eof,replace,max-lines", optAttached, "help,version", optStop),
		then: xargsCommand,
	},
}

// xargsInput stands for the arguments xargs reads from its input.
var xargsInput = Word{Text: "<xargs input>"}

// xargsCommand is the command xargs runs: echo without one; with -I/-i/--replace
// the words holding the replacement string are not literal, else what xargs reads
// is appended.
func xargsCommand(inner []Word, seen map[string]string) []Word {
	if len(inner) == 0 {
		inner = []Word{{Text: "echo", Literal: true}}
	}
	repl, replace := seen["-I"], false
	if _, ok := seen["-I"]; ok {
		replace = true
	}
	for _, k := range []string{"-i", "--replace"} {
		if v, ok := seen[k]; ok {
			repl, replace = v, true
		}
	}
	if !replace {
		return append(append([]Word(nil), inner...), xargsInput)
	}
	if repl == "" {
		repl = "{}"
	}
	out := make([]Word, len(inner))
	for i, w := range inner {
		out[i] = w
		if w.Literal && strings.Contains(w.Text, repl) {
			out[i] = Word{Text: quote(w.Text)}
		}
	}
	return out
}
