package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/roles"
)

// tokenLine is one bearer token of `dsh serve --http` and the role its line gives.
type tokenLine struct {
	token string
	role  string // "" when the line names none
	line  int    // in --token-file; 0 for a generated token
}

// readTokenFile reads --token-file: each non-empty line is "<token>" or "<token> <role>"
// (blanks around and between the words do not count). A line of more words is a usage
// error naming the line — never the token.
func readTokenFile(file string) ([]tokenLine, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, usageError{fmt.Errorf("--token-file: %w", err)}
	}
	var lines []tokenLine
	for i, text := range strings.Split(string(data), "\n") {
		words := strings.Fields(text)
		switch len(words) {
		case 0:
			continue
		case 1:
			lines = append(lines, tokenLine{token: words[0], line: i + 1})
		case 2:
			lines = append(lines, tokenLine{token: words[0], role: words[1], line: i + 1})
		default:
			return nil, usageError{fmt.Errorf("--token-file %s: line %d: want \"<token>\" or \"<token> <role>\", got %d words", file, i+1, len(words))}
		}
	}
	if len(lines) == 0 {
		return nil, usageError{fmt.Errorf("--token-file %s: no token in it (one per line)", file)}
	}
	return lines, nil
}

// tokensOf are the tokens of lines, in order.
func tokensOf(lines []tokenLine) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.token
	}
	return out
}

// tokenRoles returns the role of each token's sessions — its line's, else --role's (else
// none: the roles plugin's default) — refusing, as a usage error naming the line, a role
// the composition cannot apply: one the profile does not define, or any role when no
// roles plugin is active. A token given twice with two roles is refused too: its
// sessions would have no one role.
func (g *globalFlags) tokenRoles(rt *container.Runtime, file string, lines []tokenLine) ([]string, error) {
	rs, active := container.Lookup(rt, roles.Service)
	out := make([]string, len(lines))
	first := map[string]tokenLine{}
	for i, l := range lines {
		if prev, dup := first[l.token]; dup && prev.role != l.role {
			return nil, usageError{fmt.Errorf("--token-file %s: line %d repeats the token of line %d with another role", file, l.line, prev.line)}
		} else if !dup {
			first[l.token] = l
		}
		out[i] = g.role
		if l.role == "" {
			continue
		}
		if !active {
			return nil, usageError{fmt.Errorf("--token-file %s: line %d: role %s: profile %q composes no active roles plugin (see dsh status)", file, l.line, l.role, g.profile)}
		}
		if _, known := rs.Role(l.role); !known {
			return nil, usageError{fmt.Errorf("--token-file %s: line %d: role %s: the profile defines no such role (it has: %s)", file, l.line, l.role, strings.Join(rs.Names(), ", "))}
		}
		out[i] = l.role
	}
	return out, nil
}
