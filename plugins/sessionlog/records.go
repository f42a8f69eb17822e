package sessionlog

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/dsh-dev/dsh/plugins/tools"
)

// The records, field for field as they are written (docs/hooks.md, "The audit log").

// sessionRecord opens a session's part of its file.
type sessionRecord struct {
	Type      string `json:"type"` // "session"
	TS        string `json:"ts"`
	Session   string `json:"session"`
	Role      string `json:"role"`
	Workspace string `json:"workspace"`
	Profile   string `json:"profile"`
	Version   string `json:"version"`
}

// callRecord is one tool call.
type callRecord struct {
	Type      string         `json:"type"` // "call"
	TS        string         `json:"ts"`
	Session   string         `json:"session"`
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
	Decision  decision       `json:"decision"`
	// Approval is the outcome of the approval the call asked for, if it asked.
	Approval string     `json:"approval,omitempty"`
	Result   callResult `json:"result"`
}

// decision is the waterfall's: allow, ask or deny, and what decided ("" when no gate
// did).
type decision struct {
	Result string `json:"result"`
	Source string `json:"source"`
}

// callResult is how the call ended; the command's facts are null (or zero) for a call
// that ran none.
type callResult struct {
	IsError     bool     `json:"isError"`
	ExitCode    *int     `json:"exitCode"`
	Signal      *string  `json:"signal"`
	TimedOut    bool     `json:"timedOut"`
	Limit       *string  `json:"limit"`
	DurationMs  float64  `json:"durationMs"`
	StdoutBytes int64    `json:"stdoutBytes"`
	StderrBytes int64    `json:"stderrBytes"`
	Spill       []string `json:"spill"`
}

// jobRecord is a background job's start or finish.
type jobRecord struct {
	Type    string `json:"type"` // "job"
	TS      string `json:"ts"`
	Session string `json:"session"`
	Job     string `json:"job"`
	Event   string `json:"event"` // "started" or "finished"
	Status  string `json:"status"`
	Detail  string `json:"detail"`
}

// callOf is the record of an observed call (built on the call's goroutine: it only
// copies).
func callOf(ev *tools.Event) callRecord {
	r := callRecord{
		Type: "call", TS: now(), Session: ev.Session.ID, Tool: ev.Tool, Arguments: ev.Args,
		Decision: decision{Result: ev.Decision.Decision.String(), Source: ev.Decision.Source},
		Approval: approvalOf(ev),
		Result: callResult{IsError: ev.Result.IsError, DurationMs: float64(ev.Duration.Microseconds()) / 1000,
			Spill: []string{}},
	}
	if run, ok := tools.CommandRunOf(ev.Result); ok {
		res := &r.Result
		res.ExitCode, res.TimedOut = run.ExitCode, run.TimedOut
		res.StdoutBytes, res.StderrBytes = run.StdoutBytes, run.StderrBytes
		if run.Signal != "" {
			res.Signal = &run.Signal
		}
		if run.Limit != "" {
			res.Limit = &run.Limit
		}
		if run.Spill != nil {
			res.Spill = run.Spill
		}
	}
	return r
}

// approvalOf is the record's approval: the outcome, or "deferred" when the question
// went to the client in the result (its answer is the retry's record).
func approvalOf(ev *tools.Event) string {
	if ev.Deferred {
		return "deferred"
	}
	return string(ev.Approval)
}

// fileName is a session's file in the directory: <id>.jsonl for an id of file-name
// characters, else the id's SHA-256 (ids are the server's, but a principal's comes
// from outside).
func fileName(id string) string {
	ok := len(id) > 0 && len(id) <= 128 && id[0] != '.'
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
	}
	if ok {
		return id + ".jsonl"
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:]) + ".jsonl"
}
