package rules

import (
	"path"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// Policy is a compiled rule set: it judges bash commands. It is immutable and safe
// for concurrent use.
type Policy struct {
	def      Decision
	rules    []*rule
	warnings []string

	byProgram  map[string][]*rule // rules by each literal their program word allows
	anyProgram []*rule            // rules whose program word globs, or that have no words ("*")

	recent *outcomes // the gates' recent outcomes (Memory.Check)
}

// Default is the decision for a simple command that no rule matches.
func (p *Policy) Default() Decision { return p.def }

// Len is the number of compiled rules: one per pattern, imports included.
func (p *Policy) Len() int { return len(p.rules) }

// Warnings names what an import skipped: entries that cannot be expressed and are
// left out because leaving them out is stricter (an allow entry).
func (p *Policy) Warnings() []string { return append([]string(nil), p.warnings...) }

// Judge judges one bash command string.
func (p *Policy) Judge(command string) Judgement {
	j := &judge{p: p, cmds: make([]Command, 0, 8)}
	j.script(command, 0, syntax.LangBash)
	return j.result(command)
}

func (p *Policy) index() {
	p.recent = &outcomes{m: map[string]outcome{}}
	p.byProgram = map[string][]*rule{}
	for i, r := range p.rules {
		r.order = i
		if len(r.pat.words) == 0 || r.pat.words[0].glob != nil {
			p.anyProgram = append(p.anyProgram, r)
			continue
		}
		for _, a := range r.pat.words[0].alts {
			p.byProgram[a] = append(p.byProgram[a], r)
		}
	}
}

// match finds the strictest rule that matches one of a simple command's layers
// (the command as written, then with each wrapper removed; the last is the command
// itself), the first such rule on a tie, and the layer it matched. Deny and ask
// rules match any layer, and a program named by a path by its basename too; allow
// rules match the last layer only, exactly, and only when allowOK.
func (p *Policy) match(layers [][]Word, allowOK bool) (best *rule, at int) {
	consider := func(r *rule, li int, byBase bool) {
		if r.decision == Allow && (!allowOK || byBase || li != len(layers)-1) {
			return
		}
		if best != nil && (r.decision < best.decision || (r.decision == best.decision && r.order > best.order)) {
			return
		}
		if r.pat.match(layers[li], byBase, r.decision != Allow) {
			best, at = r, li
		}
	}
	for li, ws := range layers {
		prog := ws[0]
		if prog.Literal {
			for _, r := range p.byProgram[prog.Text] {
				consider(r, li, false)
			}
			if strings.Contains(prog.Text, "/") {
				for _, r := range p.byProgram[path.Base(prog.Text)] {
					if r.pat.bare {
						consider(r, li, true)
					}
				}
			}
		}
		for _, r := range p.anyProgram {
			consider(r, li, false)
			if prog.Literal && strings.Contains(prog.Text, "/") && r.pat.bare {
				consider(r, li, true)
			}
		}
	}
	return best, at
}

// decide sets c's decision from r, the rule that matched (nil for none).
func (p *Policy) decide(c *Command, r *rule) {
	switch {
	case r != nil:
		c.Decision, c.Rule, c.Reason = r.decision, r.name, r.reason
	case c.Unchecked != "":
		c.Decision = max(p.def, Ask)
	case c.Carrier:
		c.Decision = Allow // decides nothing: what it carries is judged on its own
	default:
		c.Decision = p.def
	}
}

// parsers keeps idle parsers per dialect: a parser is reusable, not shareable, and
// costly to build (a fresh one made a judgement of "true" 15 times slower). A bounded
// channel, not a sync.Pool, so that a collection — frequent while commands run — does
// not empty it.
var parsers sync.Map // syntax.LangVariant → chan *syntax.Parser

// idleParsers bounds the parsers kept per dialect.
const idleParsers = 8

func parse(src string, lang syntax.LangVariant) (*syntax.File, error) {
	v, ok := parsers.Load(lang)
	if !ok {
		v, _ = parsers.LoadOrStore(lang, make(chan *syntax.Parser, idleParsers))
	}
	idle := v.(chan *syntax.Parser)
	var pr *syntax.Parser
	select {
	case pr = <-idle:
	default:
		pr = syntax.NewParser(syntax.Variant(lang))
	}
	defer func() {
		select {
		case idle <- pr:
		default: // enough are idle
		}
	}()
	return pr.Parse(strings.NewReader(src), "")
}
