// Package rules is the matching core of the rules plugin: a [Policy], compiled from
// a [Config], judges a bash command string — every simple command bash would run,
// wherever it stands — and answers allow, ask or deny with the source of that
// decision. It does not decide what happens next (the pre-execute waterfall and
// approval do), and it is a policy over what bash will run, not a boundary for
// what a program it runs does: that is the sandbox.
//
//	p, err := rules.Compile(rules.Config{
//		Default: "ask",
//		Rules: []rules.Rule{
//			{Allow: []any{"npm test *", "git status"}},
//			{ID: "no-force-push", Deny: "git push --force *", Reason: "force pushes rewrite shared history"},
//		},
//	}, profileDir)
//	j := p.Judge("npm test && git push --force origin main")
//	// j.Decision == rules.Deny, j.Source == `rule "no-force-push"`
//
// # Patterns
//
// A pattern is shell words, read as bash reads them (quotes and backslashes are
// removed; an expansion such as $x is an error). A final unquoted * word matches
// any further words, none included; any other unquoted * matches any run of
// characters within one word. A pattern matches a simple command whose words
// match it one by one. Each rule has one of allow, ask or deny (a pattern or a
// list of patterns), an optional id that names it in a decision's source (else
// the pattern does), and an optional reason.
//
// # What is judged
//
// The command is parsed as bash (mvdan.cc/sh). Every simple command is judged:
// in lists and pipelines; in subshells, groups, if/while/until/for/select/case
// conditions and bodies; in function bodies (where they are defined); inside
// $(…), backquotes, <(…) and >(…), wherever those stand (arguments, assignment
// values, redirections, here-documents, [[ ]], arithmetic). Scripts carried in
// a command are parsed and judged the same way: the literal script of
// bash|sh|dash|ash|zsh|ksh|mksh -c '…'; eval's literal arguments joined by
// spaces; a literal here-document or here-string fed to a shell or to source
// (also as /dev/stdin or /dev/fd/N); trap's action, alias values, and the -C
// command of mapfile, readarray, compgen and complete. find's -exec, -execdir,
// -ok and -okdir commands are judged as simple commands of their own, {} not
// literal. Assignments, declarations (export, declare, local, readonly, typeset)
// and arithmetic ((( )), let) run no program and are not judged as commands;
// what they contain is. A command with no simple command at all gets the
// default.
//
// A simple command is judged by its words after quote removal. A word is
// literal when bash does not expand it: parameters, substitutions, arithmetic,
// unquoted globs (*, ?, [...]) and brace expansions make it non-literal (~ is
// kept as written: patterns say ~ too). Leading assignments are removed, and so
// are wrappers, repeatedly, with their options: env (and its NAME=VALUE words),
// sudo (and its NAME=VALUE words), doas, command (not -v/-V), builtin, exec,
// nice, nohup, time (the keyword, and the program with its options), timeout
// (and its duration), stdbuf, setsid, ionice, taskset and chrt (and their
// operand), busybox, toybox, and xargs (what xargs reads is one non-literal word
// appended; with -I/-i the words holding the replacement are non-literal). The
// -c script of su, runuser and script is judged too. Other programs that run
// commands (ssh, watch, parallel, strace, make, an interpreter's -c) are judged
// as the program they are: what a program does is not read.
//
// # Deciding
//
// A simple command gets the strictest rule that matches it (deny > ask > allow;
// the first rule on a tie), else the default; the command string gets the
// strictest over its simple commands, and its source is the first simple
// command with that decision. More precisely:
//
//   - Deny and ask rules match the command with its wrappers removed and every
//     layer in between (so "sudo *" matches sudo git push). Allow rules match only
//     the command itself, and not when a wrapper was named by a path (./sudo).
//   - A program named by a path (/usr/bin/git) matches a deny or ask rule whose
//     program word names no directory by its basename; an allow rule needs the
//     word as written.
//   - A non-literal word matches no pattern word; only a final * covers it (and,
//     for deny and ask rules, a * word). So "npm test $(curl x)" matches
//     "npm test *" (and curl x is judged on its own), but not "npm test"; a deny
//     rule "* push *" matches "$GIT push".
//   - A command that only carries others (bash -c '…', eval '…', a shell fed a
//     here-document, trap '…' SIG, alias) decides nothing itself: deny and ask
//     rules still match it, what it carries is judged. Named by a path
//     (/bin/bash -c), it is judged as a command as well.
//
// With default allow the policy is a deny list, and a deny rule can be
// sidestepped by an argument bash computes at run time (git $X) or by a script on
// disk (bash ./x.sh); an allow list (default ask or deny) cannot be.
//
// A part that cannot be judged statically — a program word that is not literal
// ($GIT push, $(which git) push), eval, source or a shell's script that is not
// literal (eval "$X", bash -c "$X", curl x | sh), a wrapper whose arguments are
// not literal or whose options are not known, a command that does not parse, an
// assignment to a variable that changes what runs (PATH, BASH_ENV, LD_PRELOAD,
// ...), and the places where bash evaluates a value as code (a variable in
// arithmetic, [[ -eq ]], a subscript or ${!x} whose name is not known to hold a
// number; a name given to read, unset, printf -v, test -v, declare that is not
// literal) — is never allowed by an allow rule: it gets the strictest matching
// deny or ask rule, else the default but at least ask. Its source is
// unchecked "<the part>". For a command that does not parse, what parses
// before the error is judged too (so its deny rules still apply).
//
// # Imports
//
// claudeSettings reads the Bash entries of Claude Code settings files
// (permissions.allow|ask|deny): Bash(<x>) is the pattern <x>, Bash(<x>:*) is <x>
// followed by any words, Bash alone is every command. codexRules evaluates Codex
// .rules files (Starlark): each prefix_rule(pattern, decision, justification,
// match, not_match) is its tokens followed by any words, a list element being
// alternatives; decision allow, prompt (ask) or forbidden (deny); every match
// example must match and every not_match example must not, or the load fails.
//
// Sources quote the id, pattern or text as Go does (%q), and a command text is
// shortened to 80 characters.
package rules
