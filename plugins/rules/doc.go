// Package rules is the rules plugin and its matching core: a [Policy], compiled from a
// [Config], judges a bash command string — every simple command bash would run,
// wherever it stands — and answers allow, ask or deny with the source of that decision
// ([Judgement]); the plugin ([Plugin]) is a gate of the tools registry's pre-execute
// waterfall that judges the bash tool's command with the row's policy, and remembers,
// per session, the asks a user allowed for the rest of it ([Memory]).
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
// A pattern is shell words with * globs; the command is parsed as bash (mvdan.cc/sh),
// scripts it carries (bash -c '…', eval '…', a here-document fed to a shell) are judged
// too, wrappers and assignments are removed, and what cannot be judged statically is
// never allowed by an allow rule. Claude Code settings and Codex .rules files are
// imported. docs/policy.md states the language, what is judged and how it is decided.
//
// What it does not do: decide what happens next (the waterfall and approval do), or
// bound what a program it allows does: it is a policy over what bash will run, and the
// sandbox is the boundary for what programs do.
package rules
