package rules

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// importClaude reads the Bash entries of a Claude Code settings file's
// permissions: Bash (every command), Bash(<command>) (exactly that command) and
// Bash(<prefix>:*) (any command starting with the prefix, as Claude Code documents
// it: `Bash(npm run test:*)` matches `npm run test:unit` and `npm run test --watch`;
// the prefix's last word is globbed, then any words follow). The text inside the parentheses
// is a pattern of this package, so * globs as in the rules. Entries for other tools
// are ignored. An allow entry that cannot be expressed is left out (stricter) with
// a warning; an ask or deny entry that cannot be fails the import.
func importClaude(name, file string) ([]*rule, []string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, fmt.Errorf("rules: %s: %v", name, err)
	}
	var settings struct {
		Permissions struct {
			Allow []string `json:"allow"`
			Ask   []string `json:"ask"`
			Deny  []string `json:"deny"`
		} `json:"permissions"`
	}
	if err := json.Unmarshal(data, &settings); err != nil {
		return nil, nil, fmt.Errorf("rules: %s: not a Claude Code settings file: %v", name, err)
	}
	var out []*rule
	var warns []string
	lists := []struct {
		key     string
		d       Decision
		entries []string
	}{{"deny", Deny, settings.Permissions.Deny}, {"ask", Ask, settings.Permissions.Ask}, {"allow", Allow, settings.Permissions.Allow}}
	for _, l := range lists {
		for i, e := range l.entries {
			pat, ok, err := claudePattern(e)
			if !ok {
				continue
			}
			if err != nil {
				msg := fmt.Sprintf("rules: %s: permissions.%s[%d] %q: %v", name, l.key, i, e, err)
				if l.d == Allow {
					warns = append(warns, msg+" (left out)")
					continue
				}
				return nil, warns, fmt.Errorf("%s", msg)
			}
			out = append(out, &rule{name: strings.TrimSpace(e), decision: l.d, pat: pat})
		}
	}
	return out, warns, nil
}

// claudePattern translates one permission entry; ok is false for other tools.
func claudePattern(entry string) (pattern, bool, error) {
	e := strings.TrimSpace(entry)
	if e == "Bash" || e == "Bash()" || e == "Bash(*)" {
		return pattern{rest: true}, true, nil
	}
	inner, ok := strings.CutPrefix(e, "Bash(")
	if !ok {
		return pattern{}, false, nil
	}
	inner, ok = strings.CutSuffix(inner, ")")
	if !ok {
		return pattern{}, true, fmt.Errorf("has no closing parenthesis")
	}
	prefix, isPrefix := strings.CutSuffix(inner, ":*")
	src := inner
	if isPrefix {
		src = prefix
		if prefix != "" && !strings.HasSuffix(prefix, " ") {
			src += "*" // the prefix's last word may go on: test → test:unit
		}
	}
	pat, err := compilePattern(src)
	if err != nil {
		return pattern{}, true, err
	}
	if isPrefix {
		pat.rest = true
	}
	return pat, true, nil
}
