package rules

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// Config is the configuration of the rules plugin: its own rules and default, and
// the files whose rules it imports.
type Config struct {
	// Default decides a simple command that no rule matches: "allow" (also when
	// empty), "ask" or "deny".
	Default string `yaml:"default"`
	// Rules are judged together with the imported ones; among equally strict
	// matches the first rule (these, then the imports in order) names the source.
	Rules []Rule `yaml:"rules"`
	// ClaudeSettings are Claude Code settings files; their permissions.allow, ask
	// and deny entries Bash(<command>) and Bash(<prefix>:*) become rules.
	ClaudeSettings []string `yaml:"claudeSettings"`
	// CodexRules are Codex .rules files (Starlark); each prefix_rule becomes a
	// rule, and a match or not_match example that disagrees fails the load.
	CodexRules []string `yaml:"codexRules"`

	// As the plugin's config: where relative imports are read from, and the policy
	// Validate compiled.
	dir    string
	policy *Policy
}

// Rule is one rule of the configuration: exactly one of Allow, Ask or Deny, each a
// pattern (a string) or a list of patterns.
type Rule struct {
	// ID names the rule in the source of a decision; without it the pattern that
	// matched names it.
	ID     string `yaml:"id"`
	Allow  any    `yaml:"allow"`
	Ask    any    `yaml:"ask"`
	Deny   any    `yaml:"deny"`
	Reason string `yaml:"reason"`
}

// rule is one compiled pattern with what it decides.
type rule struct {
	order    int    // position among the policy's rules: ties go to the first
	name     string // the id or the pattern, as the source names it
	decision Decision
	reason   string
	pat      pattern
}

// Compile checks cfg and builds its policy. Relative import paths are read from dir
// (the profile's directory; the working directory when dir is empty). Errors name
// the rule (rules[<index>] and its id) and the bad pattern, or the imported file;
// every bad rule is reported, one per line.
func Compile(cfg Config, dir string) (*Policy, error) {
	p := &Policy{}
	var errs []error
	if cfg.Default != "" {
		d, err := ParseDecision(cfg.Default)
		if err != nil {
			errs = append(errs, fmt.Errorf("rules: default %v", err))
		}
		p.def = d
	}
	for i, r := range cfg.Rules {
		rs, err := compileRule(i, r)
		if err != nil {
			errs = append(errs, err)
		}
		p.rules = append(p.rules, rs...)
	}
	for _, f := range cfg.ClaudeSettings {
		rs, warns, err := importClaude(f, resolve(dir, f))
		if err != nil {
			errs = append(errs, err)
		}
		p.rules = append(p.rules, rs...)
		p.warnings = append(p.warnings, warns...)
	}
	for _, f := range cfg.CodexRules {
		rs, warns, err := importCodex(f, resolve(dir, f))
		if err != nil {
			errs = append(errs, err)
		}
		p.rules = append(p.rules, rs...)
		p.warnings = append(p.warnings, warns...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p.index()
	return p, nil
}

func resolve(dir, file string) string {
	if dir == "" || filepath.IsAbs(file) {
		return file
	}
	return filepath.Join(dir, file)
}

// compileRule compiles every pattern of the i-th configured rule.
func compileRule(i int, r Rule) ([]*rule, error) {
	where := fmt.Sprintf("rules: rules[%d]", i)
	if r.ID != "" {
		where += fmt.Sprintf(" (%q)", r.ID)
	}
	var kinds []string
	var decision Decision
	var value any
	for _, k := range []struct {
		name string
		d    Decision
		v    any
	}{{"allow", Allow, r.Allow}, {"ask", Ask, r.Ask}, {"deny", Deny, r.Deny}} {
		if k.v != nil {
			kinds = append(kinds, k.name)
			decision, value = k.d, k.v
		}
	}
	if len(kinds) != 1 {
		has := "none"
		if len(kinds) > 1 {
			has = strings.Join(kinds, " and ")
		}
		return nil, fmt.Errorf("%s: a rule has exactly one of allow, ask or deny (this one has %s)", where, has)
	}
	srcs, err := patternList(value)
	if err != nil {
		return nil, fmt.Errorf("%s: %s %v", where, kinds[0], err)
	}
	var out []*rule
	var errs []error
	for _, src := range srcs {
		pat, err := compilePattern(src)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: pattern %q: %v", where, src, err))
			continue
		}
		name := r.ID
		if name == "" {
			name = strings.TrimSpace(src)
		}
		out = append(out, &rule{name: name, decision: decision, reason: r.Reason, pat: pat})
	}
	return out, errors.Join(errs...)
}

// patternList reads a pattern or a list of patterns.
func patternList(v any) ([]string, error) {
	switch v := v.(type) {
	case string:
		return []string{v}, nil
	case []string:
		if len(v) == 0 {
			return nil, errors.New("is an empty list: give at least one pattern")
		}
		return v, nil
	case []any:
		if len(v) == 0 {
			return nil, errors.New("is an empty list: give at least one pattern")
		}
		out := make([]string, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("[%d] must be a pattern (a string), got %T", i, e)
			}
			out[i] = s
		}
		return out, nil
	}
	return nil, fmt.Errorf("must be a pattern (a string) or a list of patterns, got %T", v)
}
