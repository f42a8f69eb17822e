package hooks

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// Config is the hooks plugin's configuration: its own hooks and the Claude Code
// settings files whose command hooks it imports.
type Config struct {
	// PreToolUse hooks judge a call before it runs, in order, each a gate.
	PreToolUse []Hook `yaml:"preToolUse"`
	// PostToolUse hooks see a call's result after it ran, in order.
	PostToolUse []Hook `yaml:"postToolUse"`
	// ClaudeSettings are Claude Code settings files; the command hooks of their
	// hooks.PreToolUse and hooks.PostToolUse come after the hooks above.
	ClaudeSettings []string `yaml:"claudeSettings"`

	// As the plugin's config: where relative imports are read from, and what Validate
	// compiled.
	dir       string
	pre, post []*hook
	warnings  []string
}

// Hook is one configured hook.
type Hook struct {
	// ID names the hook in a decision's source (`hook "<id>"`) and in the lines it
	// appends; without it the command does.
	ID string `yaml:"id"`
	// Matcher is a regular expression the whole tool name must match (`bash`,
	// `job_.*`); empty or `*` matches every tool.
	Matcher string `yaml:"matcher"`
	// Command runs as `bash -c <command>`.
	Command string `yaml:"command"`
	// TimeoutMs bounds one run (default 60000); then the hook has failed.
	TimeoutMs int64 `yaml:"timeoutMs" valid:"a positive integer"`
	// OnError is what a failed run (an exit other than 0 and 2, a timeout, a spawn
	// failure) answers: "deny" (the default) or "pass".
	OnError string `yaml:"onError"`
}

// Defaults of a hook's fields.
const (
	defaultTimeoutMs = 60000
	onErrorDeny      = "deny"
	onErrorPass      = "pass"
)

// The hook events.
const (
	eventPre  = "PreToolUse"
	eventPost = "PostToolUse"
)

// hook is one compiled hook.
type hook struct {
	event     string
	name      string         // the id, else the command
	match     *regexp.Regexp // nil: every tool
	tools     []string       // the tools a literal matcher names; nil: ask match
	command   string
	timeoutMs int64
	pass      bool // onError: pass
}

// source is how a decision names the hook: hook "<name>".
func (h *hook) source() string { return fmt.Sprintf("hook %q", h.name) }

// matches reports whether the hook runs for tool.
func (h *hook) matches(tool string) bool { return h.match == nil || h.match.MatchString(tool) }

// SetProfileDir records the directory relative import paths are read from: the
// profile file's (container.ProfileRelative).
func (c *Config) SetProfileDir(dir string) { c.dir = dir }

// Validate compiles every hook and import, so that a bad matcher or an unreadable
// settings file refuses the profile rather than leaving calls unchecked.
func (c *Config) Validate() error {
	var errs []error
	c.pre, c.post, c.warnings = nil, nil, nil
	for i, h := range c.PreToolUse {
		ch, err := compile(eventPre, fmt.Sprintf("preToolUse[%d]", i), h)
		errs = append(errs, err)
		c.pre = append(c.pre, ch)
	}
	for i, h := range c.PostToolUse {
		ch, err := compile(eventPost, fmt.Sprintf("postToolUse[%d]", i), h)
		errs = append(errs, err)
		c.post = append(c.post, ch)
	}
	for _, f := range c.ClaudeSettings {
		pre, post, warns, err := importClaude(f, resolve(c.dir, f))
		errs = append(errs, err)
		c.pre, c.post = append(c.pre, pre...), append(c.post, post...)
		c.warnings = append(c.warnings, warns...)
	}
	return errors.Join(errs...)
}

func resolve(dir, file string) string {
	if dir == "" || filepath.IsAbs(file) {
		return file
	}
	return filepath.Join(dir, file)
}

// compile checks one hook (where names it in errors) and compiles its matcher.
func compile(event, where string, h Hook) (*hook, error) {
	if h.ID != "" {
		where += fmt.Sprintf(" (%q)", h.ID)
	}
	if strings.TrimSpace(h.Command) == "" {
		return nil, fmt.Errorf("%s: command must be a non-empty string", where)
	}
	ch := &hook{event: event, name: h.ID, command: h.Command, timeoutMs: h.TimeoutMs}
	if ch.name == "" {
		ch.name = h.Command
	}
	switch h.OnError {
	case "", onErrorDeny:
	case onErrorPass:
		ch.pass = true
	default:
		return nil, fmt.Errorf("%s: onError must be %q or %q, got %q", where, onErrorDeny, onErrorPass, h.OnError)
	}
	switch {
	case ch.timeoutMs == 0:
		ch.timeoutMs = defaultTimeoutMs
	case ch.timeoutMs < 0:
		return nil, fmt.Errorf("%s: timeoutMs must be a positive integer, got %d", where, h.TimeoutMs)
	}
	if m := h.Matcher; m != "" && m != "*" {
		re, err := regexp.Compile(`^(?:` + m + `)$`)
		if err != nil {
			return nil, fmt.Errorf("%s: matcher %q: %v", where, m, err)
		}
		ch.match = re
		if regexp.QuoteMeta(m) == m {
			ch.tools = []string{m} // a literal: the registry asks the gate for that tool only
		}
	}
	return ch, nil
}
