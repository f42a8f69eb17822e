package hooks

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/dsh-dev/dsh/plugins/tools"
)

// hookOutputs seed the fuzzers: each answer a hook may give, and near misses.
var hookOutputs = []string{
	``,
	`looks fine`,
	`{}`,
	`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}`,
	`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no"}}`,
	`{"hookSpecificOutput":{"permissionDecision":"ask","updatedInput":{"command":"ls","n":1}}}`,
	`{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"ctx"}}`,
	`{"decision":"approve","reason":"ok"}`,
	`{"decision":"block","reason":"no"}`,
	`{"continue":false,"stopReason":"stop"}`,
	`{"decision":3}`,
	`{"hookSpecificOutput":{"permissionDecision":"maybe"}}`,
	`{"hookSpecificOutput":[]}`,
	`{} {}`,
	`{"decision":"block"`,
	"\n  {\"decision\":\"approve\"}\n",
}

// The PreToolUse answer parser never panics, is deterministic, reads text that is not
// an object as no answer, and answers only the four decisions, with replacement
// arguments that are JSON.
func FuzzPreAnswer(f *testing.F) {
	for _, s := range hookOutputs {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stdout []byte) {
		a, err := preAnswer(stdout)
		b, err2 := preAnswer(stdout)
		if !reflect.DeepEqual(a, b) || (err == nil) != (err2 == nil) {
			t.Fatalf("not deterministic: %+v %v / %+v %v", a, err, b, err2)
		}
		if err != nil {
			if a.decision != tools.Pass || a.input != nil {
				t.Fatalf("an error with an answer: %+v", a)
			}
			return
		}
		if a.decision > tools.Deny {
			t.Fatalf("decision %v", a.decision)
		}
		if trimmed := bytes.TrimSpace(stdout); len(trimmed) == 0 || trimmed[0] != '{' {
			if a.decision != tools.Pass || a.reason != "" || a.input != nil {
				t.Fatalf("plain text answered %+v", a)
			}
		}
		if a.input != nil {
			if _, err := json.Marshal(a.input); err != nil {
				t.Fatalf("replacement arguments are not JSON: %v", err)
			}
		}
	})
}

// The PostToolUse parser never panics, is deterministic, and every line it returns
// has text.
func FuzzPostLines(f *testing.F) {
	for _, s := range hookOutputs {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stdout []byte) {
		lines, err := postLines(stdout)
		again, err2 := postLines(stdout)
		if !reflect.DeepEqual(lines, again) || (err == nil) != (err2 == nil) {
			t.Fatalf("not deterministic")
		}
		if err != nil && lines != nil {
			t.Fatalf("an error with lines: %q", lines)
		}
		for _, l := range lines {
			if l == "" {
				t.Fatal("an empty line")
			}
		}
	})
}

// The answers the seeds stand for.
func TestAnswers(t *testing.T) {
	for _, c := range []struct {
		stdout string
		want   answer
		err    string
	}{
		{``, answer{}, ""},
		{`looks fine`, answer{}, ""},
		{`{}`, answer{}, ""},
		{`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}`, answer{decision: tools.Allow}, ""},
		{`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no"}}`, answer{decision: tools.Deny, reason: "no"}, ""},
		{`{"hookSpecificOutput":{"permissionDecision":"ask","updatedInput":{"command":"ls","n":1}}}`, answer{decision: tools.Ask, input: map[string]any{"command": "ls", "n": float64(1)}}, ""},
		{`{"hookSpecificOutput":{"updatedInput":{"command":"ls"}}}`, answer{input: map[string]any{"command": "ls"}}, ""},
		{`{"hookSpecificOutput":{"hookEventName":"PostToolUse","permissionDecision":"deny"}}`, answer{}, ""},
		{`{"decision":"approve","reason":"ok"}`, answer{decision: tools.Allow, reason: "ok"}, ""},
		{`{"decision":"block","reason":"no"}`, answer{decision: tools.Deny, reason: "no"}, ""},
		{`{"decision":"block","hookSpecificOutput":{"permissionDecision":"allow"}}`, answer{decision: tools.Allow}, ""},
		{`{"continue":false,"stopReason":"stop","decision":"approve"}`, answer{decision: tools.Deny, reason: "stop"}, ""},
		{`{"decision":"undefined"}`, answer{}, `unknown decision "undefined"`},
		{`{"hookSpecificOutput":{"permissionDecision":"maybe"}}`, answer{}, `unknown permissionDecision "maybe"`},
		{`{} {}`, answer{}, "its output is not hook JSON: more follows the object"},
	} {
		got, err := preAnswer([]byte(c.stdout))
		if !reflect.DeepEqual(got, c.want) || (err == nil) != (c.err == "") || err != nil && err.Error() != c.err {
			t.Errorf("%s: %+v %v, want %+v %q", c.stdout, got, err, c.want, c.err)
		}
	}
}
