package rules

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// Judgement is a policy's answer for one bash command.
type Judgement struct {
	// Decision is the strictest decision over Commands.
	Decision Decision
	// Source names what decided, as the denial text has it: rule "<id or
	// pattern>", default for "<the first simple command no rule matched>", or
	// unchecked "<the part that cannot be judged statically>".
	Source string
	// Reason is the deciding rule's reason, if it has one.
	Reason string
	// Commands lists every simple command judged, and every part that cannot be
	// judged statically, in source order (a carried script right after what
	// carries it).
	Commands []Command
}

// Command is the judgement of one simple command, or of one part of the command
// that cannot be judged statically.
type Command struct {
	// Depth counts the scripts the command is carried in (bash -c, eval, a
	// here-document fed to a shell, find -exec): 0 at the top.
	Depth int
	// Text is the source text, as written (inside its carried script).
	Text string
	// Words are the words the deciding rule matched — after quote removal, the
	// command with its wrappers removed unless a deny or ask rule matched an outer
	// layer. Nil for a part that is not a simple command.
	Words []Word
	// Decision is this command's decision.
	Decision Decision
	// Carrier marks a command that only carries others (bash -c '…', eval '…',
	// trap '…' EXIT): only deny and ask rules apply to it, and unless one matched
	// (Rule set) it decides nothing.
	Carrier bool
	// Rule is the id or pattern of the rule that matched; empty when none did.
	Rule string
	// Reason is that rule's reason.
	Reason string
	// Unchecked says why the command cannot be judged statically (so that no allow
	// rule applies and it gets at least ask); empty when it can be. Part is what
	// cannot be judged.
	Unchecked string
	Part      string
}

// decides reports whether c takes part in the call's decision.
func (c *Command) decides() bool { return !c.Carrier || c.Rule != "" }

// Source names what decided c, as Judgement.Source does.
func (c *Command) Source() string {
	switch {
	case c.Rule != "":
		return fmt.Sprintf("rule %q", c.Rule)
	case c.Unchecked != "":
		return fmt.Sprintf("unchecked %q", shorten(c.Part))
	}
	return fmt.Sprintf("default for %q", shorten(c.Text))
}

// result combines the judged commands into the call's judgement.
func (j *judge) result(command string) Judgement {
	out := Judgement{Commands: j.cmds}
	var first *Command
	for i := range j.cmds {
		c := &j.cmds[i]
		if !c.decides() {
			continue
		}
		if first == nil || c.Decision > first.Decision {
			first = c
		}
	}
	if first == nil {
		text := strings.TrimSpace(command)
		if len(j.cmds) > 0 {
			text = j.cmds[0].Text
		}
		out.Decision, out.Source = j.p.def, fmt.Sprintf("default for %q", shorten(text))
		return out
	}
	out.Decision, out.Source, out.Reason = first.Decision, first.Source(), first.Reason
	return out
}

// Explain renders the judged commands, one line each: the decision ("-" for a
// carrier that decides nothing), the words as judged, and what decided. Carried
// commands are indented by two spaces per level.
func (j Judgement) Explain() string {
	var b strings.Builder
	for _, c := range j.Commands {
		b.WriteString(strings.Repeat("  ", c.Depth))
		d := c.Decision.String()
		if !c.decides() {
			d = "-"
		}
		what := oneLine(c.Text)
		if c.Words != nil {
			what = renderWords(c.Words)
		}
		fmt.Fprintf(&b, "%-5s  %s  %s\n", d, what, c.how())
	}
	return b.String()
}

func (c *Command) how() string {
	var parts []string
	if c.Rule != "" {
		s := fmt.Sprintf("rule %q", c.Rule)
		if c.Reason != "" {
			s += " (" + oneLine(c.Reason) + ")"
		}
		parts = append(parts, s)
	}
	switch {
	case c.Unchecked != "":
		parts = append(parts, "unchecked: "+oneLine(c.Unchecked))
	case c.Carrier && c.Rule == "":
		parts = append(parts, "carries a script, judged below")
	case c.Rule == "":
		parts = append(parts, "default (no rule matched)")
	}
	return strings.Join(parts, "; ")
}

// renderWords writes words as shell words: a literal quoted where it needs it, a
// non-literal word as its source text (so the two never look alike).
func renderWords(ws []Word) string {
	out := make([]string, len(ws))
	for i, w := range ws {
		if !w.Literal {
			out[i] = oneLine(w.Text)
			continue
		}
		out[i] = quote(w.Text)
	}
	return strings.Join(out, " ")
}

// quote writes s as one shell word, quoted only where it needs it.
func quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=@%+,^[]~") == "" {
		return s
	}
	q, err := syntax.Quote(s, syntax.LangBash)
	if err != nil {
		return strconv.Quote(s)
	}
	return q
}

// oneLine escapes line breaks and tabs so that a text stays on one line.
func oneLine(s string) string {
	return strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`).Replace(s)
}

// shorten keeps a quoted part of a source short: 80 characters at most.
func shorten(s string) string {
	const limit = 80
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	r := []rune(s)
	return string(r[:limit-1]) + "…"
}
