package rules

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// codexSteps bounds the evaluation of a .rules file (it is a program).
const codexSteps = 1_000_000

// importCodex evaluates a Codex .rules file (Starlark) and turns each prefix_rule
// into a rule: the pattern's tokens, an element that is a list being alternatives,
// then any further words. decision is allow (the default), prompt (ask) or
// forbidden (deny); justification is the reason. Each match example must match
// the rule's pattern and each not_match example must not, or the import fails.
// host_executable is accepted and has no effect (a program named by a path matches
// deny and ask rules by its basename anyway); network_rule is accepted with a
// warning (the sandbox's network setting is what controls the network).
func importCodex(name, file string) ([]*rule, []string, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, fmt.Errorf("rules: %s: %v", name, err)
	}
	c := &codexFile{name: name}
	thread := &starlark.Thread{Name: name}
	thread.SetMaxExecutionSteps(codexSteps)
	predeclared := starlark.StringDict{
		"prefix_rule":     starlark.NewBuiltin("prefix_rule", c.prefixRule),
		"host_executable": starlark.NewBuiltin("host_executable", c.hostExecutable),
		"network_rule":    starlark.NewBuiltin("network_rule", c.networkRule),
	}
	opts := &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true}
	if _, err := starlark.ExecFileOptions(opts, thread, name, src, predeclared); err != nil {
		var ex *exampleError
		if errors.As(err, &ex) {
			return nil, nil, fmt.Errorf("rules: %s: %s", name, ex.msg)
		}
		return nil, nil, fmt.Errorf("rules: %s: %v", name, err)
	}
	return c.rules, c.warnings, nil
}

// codexFile collects the rules of one file as it is evaluated.
type codexFile struct {
	name     string
	rules    []*rule
	warnings []string
}

// exampleError is a match or not_match example that disagrees with its pattern;
// its text is the whole message.
type exampleError struct{ msg string }

func (e *exampleError) Error() string { return e.msg }

func (c *codexFile) prefixRule(_ *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var pat *starlark.List
	decision := "allow"
	var justification starlark.Value = starlark.None
	var match, notMatch *starlark.List
	if err := starlark.UnpackArgs(fn.Name(), args, kwargs, "pattern", &pat, "decision?", &decision,
		"justification?", &justification, "match?", &match, "not_match?", &notMatch); err != nil {
		return nil, err
	}
	d, err := codexDecision(decision)
	if err != nil {
		return nil, err
	}
	reason := ""
	if justification != starlark.None {
		s, ok := starlark.AsString(justification)
		if !ok || strings.TrimSpace(s) == "" {
			return nil, errors.New("prefix_rule: justification must be a non-empty string")
		}
		reason = s
	}
	p, label, err := codexPattern(pat)
	if err != nil {
		return nil, err
	}
	if err := checkExamples(p, match, true); err != nil {
		return nil, err
	}
	if err := checkExamples(p, notMatch, false); err != nil {
		return nil, err
	}
	c.rules = append(c.rules, &rule{name: label, decision: d, reason: reason, pat: p})
	return starlark.None, nil
}

func (c *codexFile) hostExecutable(_ *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var paths *starlark.List
	if err := starlark.UnpackArgs(fn.Name(), args, kwargs, "name", &name, "paths", &paths); err != nil {
		return nil, err
	}
	return starlark.None, nil
}

func (c *codexFile) networkRule(thread *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	pos := thread.CallFrame(1).Pos
	c.warnings = append(c.warnings, fmt.Sprintf("rules: %s:%d: network_rule has no effect here (the sandbox's network setting controls the network)", c.name, pos.Line))
	return starlark.None, nil
}

func codexDecision(s string) (Decision, error) {
	switch s {
	case "allow":
		return Allow, nil
	case "prompt":
		return Ask, nil
	case "forbidden":
		return Deny, nil
	}
	return Allow, fmt.Errorf("prefix_rule: decision must be %q, %q or %q, got %q", "allow", "prompt", "forbidden", s)
}

// codexPattern translates a prefix_rule pattern: literal tokens (an element may be
// a list of alternatives), then any further words. The label names the rule:
// the tokens joined by spaces, alternatives as (a|b).
func codexPattern(l *starlark.List) (pattern, string, error) {
	if l.Len() == 0 {
		return pattern{}, "", errors.New("prefix_rule: pattern cannot be empty")
	}
	p := pattern{rest: true}
	var label []string
	for i := range l.Len() {
		var alts []string
		switch v := l.Index(i).(type) {
		case starlark.String:
			alts = []string{string(v)}
		case *starlark.List:
			for j := range v.Len() {
				s, ok := starlark.AsString(v.Index(j))
				if !ok {
					return pattern{}, "", fmt.Errorf("prefix_rule: pattern alternative must be a string (got %s)", v.Index(j).Type())
				}
				alts = append(alts, s)
			}
			if len(alts) == 0 {
				return pattern{}, "", errors.New("prefix_rule: pattern alternatives cannot be empty")
			}
		default:
			return pattern{}, "", fmt.Errorf("prefix_rule: pattern element must be a string or a list of strings (got %s)", v.Type())
		}
		p.words = append(p.words, wordMatcher{alts: alts})
		if len(alts) == 1 {
			label = append(label, alts[0])
		} else {
			label = append(label, "("+strings.Join(alts, "|")+")")
		}
	}
	p.bare = !p.words[0].hasSlash()
	return p, strings.Join(label, " "), nil
}

// checkExamples checks match (want true) or not_match examples against p.
func checkExamples(p pattern, examples *starlark.List, want bool) error {
	if examples == nil {
		return nil
	}
	for i := range examples.Len() {
		ws, text, err := codexExample(examples.Index(i))
		if err != nil {
			return err
		}
		if p.match(ws, false, false) == want {
			continue
		}
		if want {
			return &exampleError{fmt.Sprintf("prefix_rule example %q does not match its pattern", text)}
		}
		return &exampleError{fmt.Sprintf("prefix_rule not_match example %q matches its pattern", text)}
	}
	return nil
}

// codexExample reads an example command: a string of shell words, or a list of
// tokens.
func codexExample(v starlark.Value) ([]Word, string, error) {
	if s, ok := starlark.AsString(v); ok {
		ws, err := exampleWords(s)
		if err != nil {
			return nil, "", fmt.Errorf("prefix_rule: example %q: %v", s, err)
		}
		return ws, s, nil
	}
	l, ok := v.(*starlark.List)
	if !ok {
		return nil, "", fmt.Errorf("prefix_rule: example must be a string or a list of strings (got %s)", v.Type())
	}
	var ws []Word
	var toks []string
	for j := range l.Len() {
		s, ok := starlark.AsString(l.Index(j))
		if !ok {
			return nil, "", fmt.Errorf("prefix_rule: example tokens must be strings (got %s)", l.Index(j).Type())
		}
		ws = append(ws, Word{Text: s, Literal: true})
		toks = append(toks, s)
	}
	if len(ws) == 0 {
		return nil, "", errors.New("prefix_rule: example cannot be an empty list")
	}
	return ws, strings.Join(toks, " "), nil
}

// exampleWords splits an example string into literal words, as a pattern is read.
func exampleWords(s string) ([]Word, error) {
	p, err := compilePattern(s)
	if err != nil {
		return nil, err
	}
	var ws []Word
	for _, m := range p.words {
		if m.glob != nil {
			return nil, errors.New("has a glob (*): an example is a command")
		}
		ws = append(ws, Word{Text: m.alts[0], Literal: true})
	}
	if p.rest {
		return nil, errors.New("has a glob (*): an example is a command")
	}
	return ws, nil
}
