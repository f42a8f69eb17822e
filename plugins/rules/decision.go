package rules

import "fmt"

// Decision is what a policy answers for a command, ordered by strictness: Allow <
// Ask < Deny. The strictest of several decisions is their maximum.
type Decision uint8

// The decisions.
const (
	Allow Decision = iota
	Ask
	Deny
)

// String returns "allow", "ask" or "deny".
func (d Decision) String() string {
	switch d {
	case Allow:
		return "allow"
	case Ask:
		return "ask"
	case Deny:
		return "deny"
	}
	return fmt.Sprintf("Decision(%d)", uint8(d))
}

// ParseDecision reads "allow", "ask" or "deny".
func ParseDecision(s string) (Decision, error) {
	switch s {
	case "allow":
		return Allow, nil
	case "ask":
		return Ask, nil
	case "deny":
		return Deny, nil
	}
	return Allow, fmt.Errorf("must be one of %q, %q or %q, got %q", "allow", "ask", "deny", s)
}
