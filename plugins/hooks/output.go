package hooks

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/dsh-dev/dsh/plugins/tools"
)

// output is what a hook may print on stdout after exiting 0: Claude Code's hook JSON.
type output struct {
	// Continue false stops the call whatever else the output says (a deny, with
	// StopReason as the reason).
	Continue   *bool  `json:"continue"`
	StopReason string `json:"stopReason"`
	// Decision and Reason are the legacy answer: "approve" or "block" (PreToolUse),
	// "block" (PostToolUse: a line for the result).
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	// HookSpecificOutput is the current answer.
	HookSpecificOutput *specific `json:"hookSpecificOutput"`
}

type specific struct {
	HookEventName            string         `json:"hookEventName"`
	PermissionDecision       string         `json:"permissionDecision"`
	PermissionDecisionReason string         `json:"permissionDecisionReason"`
	UpdatedInput             map[string]any `json:"updatedInput"`
	AdditionalContext        string         `json:"additionalContext"`
}

// answer is a PreToolUse hook's answer, read from its output.
type answer struct {
	decision tools.Decision
	reason   string
	input    map[string]any // updatedInput: the replacement arguments, or nil
}

// readOutput decodes a hook's stdout: nothing, or text that is not a JSON object, is
// no answer (nil); an object that is not hook JSON is an error (the hook meant to say
// something dsh cannot read).
func readOutput(stdout []byte) (*output, error) {
	trimmed := bytes.TrimSpace(stdout)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, nil
	}
	var out output
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("its output is not hook JSON: %v", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("its output is not hook JSON: more follows the object")
	}
	return &out, nil
}

// forEvent is the hook-specific output when it is for event (hookEventName absent or
// event), else nil.
func (o *output) forEvent(event string) *specific {
	if s := o.HookSpecificOutput; s != nil && (s.HookEventName == "" || s.HookEventName == event) {
		return s
	}
	return nil
}

// preAnswer reads a PreToolUse hook's stdout after exit 0. A stop (continue: false)
// denies; hookSpecificOutput.permissionDecision (allow, ask, deny) wins over the legacy
// decision (approve, block); an updatedInput replaces the arguments; no decision is a
// pass. An answer dsh cannot read is an error: the hook failed.
func preAnswer(stdout []byte) (answer, error) {
	out, err := readOutput(stdout)
	if out == nil || err != nil {
		return answer{}, err
	}
	if out.Continue != nil && !*out.Continue {
		return answer{decision: tools.Deny, reason: out.StopReason}, nil
	}
	var a answer
	if s := out.forEvent(eventPre); s != nil {
		a.input = s.UpdatedInput
		if s.PermissionDecision != "" {
			switch s.PermissionDecision {
			case "allow":
				a.decision = tools.Allow
			case "ask":
				a.decision = tools.Ask
			case "deny":
				a.decision = tools.Deny
			default:
				return answer{}, fmt.Errorf("unknown permissionDecision %q", s.PermissionDecision)
			}
			a.reason = s.PermissionDecisionReason
			return a, nil
		}
	}
	switch out.Decision {
	case "":
	case "approve":
		a.decision, a.reason = tools.Allow, out.Reason
	case "block":
		a.decision, a.reason = tools.Deny, out.Reason
	default:
		return answer{}, fmt.Errorf("unknown decision %q", out.Decision)
	}
	return a, nil
}

// postLines reads a PostToolUse hook's stdout after exit 0: the reason of a block and
// the additionalContext, each one line for the result. Output dsh cannot read is an
// error: the hook failed.
func postLines(stdout []byte) ([]string, error) {
	out, err := readOutput(stdout)
	if out == nil || err != nil {
		return nil, err
	}
	var lines []string
	switch out.Decision {
	case "":
	case "block":
		lines = append(lines, orDefault(out.Reason, "blocked"))
	default:
		return nil, fmt.Errorf("unknown decision %q", out.Decision)
	}
	if s := out.forEvent(eventPost); s != nil && s.AdditionalContext != "" {
		lines = append(lines, s.AdditionalContext)
	}
	return lines, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
