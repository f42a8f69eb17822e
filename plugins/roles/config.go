package roles

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/dsh-dev/dsh/plugins/rules"
	"github.com/dsh-dev/dsh/shell"
)

// Config is the roles plugin's configuration.
type Config struct {
	// Roles are the roles by name (a word: token files write "<token> <role>").
	Roles map[string]*Role `yaml:"roles"`
	// Default is the role of a session that has none; empty: such sessions are not
	// restricted.
	Default string `yaml:"default"`
}

// Role is what the sessions of one role may do.
type Role struct {
	// Tools are the names of the tools the role sees and may call; omitted: every tool
	// (an empty list: none).
	Tools []string `yaml:"tools"`
	// MaxMode is the widest sandbox mode the role's commands run in: read-only,
	// workspace-write or danger-full-access (omitted: no ceiling). It needs a confining
	// executor below danger-full-access.
	MaxMode string `yaml:"maxMode"`
	// Default and Rules are the role's own policy for the bash tool, as the rules
	// plugin's default and rules; judged together with every rules row (the strictest
	// wins). Omitted both: the role adds no rules.
	Default string       `yaml:"default"`
	Rules   []rules.Rule `yaml:"rules"`

	policy *rules.Policy // compiled by Validate; nil when the role has no rules
}

// Sees reports whether the role may see and call tool.
func (r *Role) Sees(tool string) bool { return r.Tools == nil || slices.Contains(r.Tools, tool) }

// Policy is the role's compiled policy for bash, nil when it has none.
func (r *Role) Policy() *rules.Policy { return r.policy }

// Validate checks every role (in name order) and compiles its rules.
func (c *Config) Validate() error {
	if len(c.Roles) == 0 {
		return errors.New("roles must define at least one role")
	}
	var errs []error
	for _, name := range c.names() {
		if c.Roles[name] == nil { // `reader:` alone: a role without restrictions
			c.Roles[name] = &Role{}
		}
		if err := c.Roles[name].validate(name); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Default != "" && c.Roles[c.Default] == nil {
		errs = append(errs, fmt.Errorf("default names the role %q, which roles does not define (it has: %s)",
			c.Default, strings.Join(c.names(), ", ")))
	}
	return errors.Join(errs...)
}

func (c *Config) names() []string { return slices.Sorted(maps.Keys(c.Roles)) }

func (r *Role) validate(name string) error {
	key := "roles." + name
	if !isWord(name) {
		return fmt.Errorf("%s: a role's name is one word (letters, digits, - _ . :), got %q", key, name)
	}
	if r.MaxMode != "" && shell.ModeRank(r.MaxMode) < 0 {
		return fmt.Errorf("%s.maxMode must be one of %q, %q or %q, got %q", key,
			shell.ModeReadOnly, shell.ModeWorkspaceWrite, shell.ModeDangerFullAccess, r.MaxMode)
	}
	for i, t := range r.Tools {
		if strings.TrimSpace(t) == "" {
			return fmt.Errorf("%s.tools[%d] must be a tool's name, got %q", key, i, t)
		}
	}
	if r.Default == "" && len(r.Rules) == 0 {
		r.policy = nil
		return nil
	}
	p, err := rules.Compile(rules.Config{Default: r.Default, Rules: r.Rules}, "")
	if err != nil {
		// rules' "rules: rules[2]: …" and "rules: default …" become this role's keys.
		lines := strings.Split(err.Error(), "\n")
		for i, l := range lines {
			lines[i] = key + "." + strings.TrimPrefix(l, "rules: ")
		}
		return errors.New(strings.Join(lines, "\n"))
	}
	r.policy = p
	return nil
}

// isWord reports whether name can stand as one word of a token file's line.
func isWord(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		if !unicode.IsLetter(c) && !unicode.IsDigit(c) && !strings.ContainsRune("-_.:", c) {
			return false
		}
	}
	return true
}
