package hooks

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
)

// claudeSettings is the part of a Claude Code settings file the hooks plugin reads.
type claudeSettings struct {
	Hooks map[string][]struct {
		Matcher string `json:"matcher"`
		Hooks   []struct {
			Type    string  `json:"type"`
			Command string  `json:"command"`
			Timeout float64 `json:"timeout"` // seconds
		} `json:"hooks"`
	} `json:"hooks"`
}

// claudeTool matches Claude Code's name of the bash tool in a matcher.
var claudeTool = regexp.MustCompile(`\bBash\b`)

// importClaude reads the command hooks of a Claude Code settings file's
// hooks.PreToolUse and hooks.PostToolUse, in order; a matcher's `Bash` is dsh's `bash`
// and a timeout is in seconds. Other events and other kinds of hooks are left out with
// a warning; a file that cannot be read, or a hook that does not compile, fails the
// import.
func importClaude(name, file string) (pre, post []*hook, warns []string, err error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %v", name, err)
	}
	var s claudeSettings
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, nil, nil, fmt.Errorf("%s: not a Claude Code settings file: %v", name, err)
	}
	events := make([]string, 0, len(s.Hooks))
	for e := range s.Hooks {
		events = append(events, e)
	}
	sort.Strings(events)
	for _, event := range events {
		if event != eventPre && event != eventPost {
			warns = append(warns, fmt.Sprintf("hooks: %s: hooks.%s: only PreToolUse and PostToolUse hooks run in dsh (left out)", name, event))
			continue
		}
		for i, group := range s.Hooks[event] {
			for j, h := range group.Hooks {
				where := fmt.Sprintf("%s: hooks.%s[%d].hooks[%d]", name, event, i, j)
				if h.Type != "command" {
					warns = append(warns, fmt.Sprintf("hooks: %s: a %q hook is not a command hook (left out)", where, h.Type))
					continue
				}
				ch, err := compile(event, where, Hook{
					Matcher:   claudeTool.ReplaceAllString(group.Matcher, "bash"),
					Command:   h.Command,
					TimeoutMs: int64(h.Timeout * 1000),
				})
				if err != nil {
					return nil, nil, warns, err
				}
				if event == eventPre {
					pre = append(pre, ch)
				} else {
					post = append(post, ch)
				}
			}
		}
	}
	return pre, post, warns, nil
}
