package approval

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/shell"
)

// Policies.
const (
	// PolicyAsk asks the session's user; a session without a channel gets
	// ApprovalUnavailable.
	PolicyAsk = "ask"
	// PolicyAllow approves every request without asking.
	PolicyAllow = "allow"
	// PolicyDeny rejects every request without asking.
	PolicyDeny = "deny"
)

// Plugin declares the approval service.
var Plugin = container.Define(container.Declaration[*Config]{
	Name:    "approval",
	Aliases: []string{"@deepseek-ai/dsh-approval"},
	Provide: container.Keys{Service},
	Config:  func() *Config { return &Config{Policy: PolicyAsk} },
	Apply: func(act *container.Activation, cfg *Config) error {
		a, err := New(cfg.Policy, act.Logger())
		if err != nil {
			return err
		}
		if prev, ok := replacedPolicy(act); ok && policyRank(cfg.Policy) > policyRank(prev) {
			// Applied (the user may mean it), never silently: escalations now need less.
			act.Logger().Warn(fmt.Sprintf("profile reload widens confinement: approval policy %s → %s", prev, cfg.Policy))
		}
		return Service.Provide(act, a)
	},
})

// replacedPolicy is the policy this row had before a reload replaced it.
func replacedPolicy(act *container.Activation) (string, bool) {
	prev, ok := container.ReplacedConfig[*Config](act)
	if !ok || prev == nil {
		return "", false
	}
	return prev.Policy, true
}

// policyRank orders the policies by how much they let through: deny < ask < allow.
func policyRank(p string) int {
	switch p {
	case PolicyDeny:
		return 0
	case PolicyAsk:
		return 1
	}
	return 2
}

// Module registers Plugin in the catalog.
var Module = container.ModuleOf(Plugin)

// Config is the plugin's configuration.
type Config struct {
	// Policy is how requests are decided: "ask" (default), "allow" or "deny".
	Policy string `yaml:"policy"`
}

// Validate checks the policy.
func (c *Config) Validate() error {
	return validPolicy(c.Policy)
}

func validPolicy(p string) error {
	switch p {
	case PolicyAsk, PolicyAllow, PolicyDeny:
		return nil
	}
	return fmt.Errorf("policy must be one of %q, %q or %q, got %q", PolicyAsk, PolicyAllow, PolicyDeny, p)
}

// PolicyApprover is the Approver the plugin provides. It is safe for
// concurrent use; concurrent requests of one session are put to its Prompter
// independently (the channel decides whether they queue).
type PolicyApprover struct {
	policy string
	log    *slog.Logger
}

var _ Approver = (*PolicyApprover)(nil)

// New returns an Approver deciding by policy and logging to log (slog.Default() when nil).
func New(policy string, log *slog.Logger) (*PolicyApprover, error) {
	if err := validPolicy(policy); err != nil {
		return nil, fmt.Errorf("approval: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	return &PolicyApprover{policy: policy, log: log}, nil
}

// Policy returns the configured policy.
func (a *PolicyApprover) Policy() string { return a.policy }

// Request decides req. It never panics and always returns one of the outcomes
// (AllowedForSession only when req.ForSession): a ctx already cancelled → cancelled;
// allow → allowed-once and deny → rejected without asking; ask → the session's Prompter
// decides (Accepted → allowed-once, AcceptedForSession → allowed-for-session, Declined →
// rejected, Cancelled → cancelled), a session without a Prompter, a channel error or an
// unknown answer → unavailable, and a ctx cancelled while asking or a Prompter returning
// ErrDeferred → cancelled. "For the session" is offered only through a
// container.SessionPrompter; another Prompter is asked once-or-not.
func (a *PolicyApprover) Request(ctx context.Context, req Request) (outcome Outcome) {
	attrs := []any{
		"session", sessionID(req.Session),
		"tool", req.Tool,
		"reason", req.Reason,
		"policy", a.policy,
	}
	if req.Command != "" {
		attrs = append(attrs, "command", req.Command)
	}
	if req.Source != "" {
		attrs = append(attrs, "source", req.Source)
	}
	a.log.Info("approval requested", attrs...)
	var channelErr error
	deferred := false
	defer func() {
		if p := recover(); p != nil {
			// A misbehaving channel must not take the caller down; nothing is approved.
			channelErr = fmt.Errorf("prompter panicked: %v", p)
			outcome = Unavailable
		}
		if deferred {
			a.log.Info("approval deferred to the client", attrs...)
			return
		}
		decided := append(attrs, "outcome", string(outcome))
		if channelErr != nil {
			a.log.Warn("approval decided", append(decided, "error", channelErr.Error())...)
			return
		}
		a.log.Info("approval decided", decided...)
	}()

	if ctx.Err() != nil {
		return Cancelled
	}
	switch a.policy {
	case PolicyAllow:
		return AllowedOnce
	case PolicyDeny:
		return Rejected
	}
	if req.Session == nil || req.Session.Prompter == nil {
		channelErr = errNoChannel
		return Unavailable
	}
	answer, err := ask(ctx, req.Session.Prompter, req)
	if err != nil {
		if ctx.Err() != nil {
			return Cancelled
		}
		if errors.Is(err, ErrDeferred) {
			deferred = true
			return Cancelled
		}
		channelErr = err
		return Unavailable
	}
	switch answer {
	case container.Accepted:
		return AllowedOnce
	case container.AcceptedForSession:
		if req.ForSession {
			return AllowedForSession
		}
		return AllowedOnce // the user agreed; this request can only be allowed once
	case container.Declined:
		return Rejected
	case container.Cancelled:
		return Cancelled
	}
	channelErr = fmt.Errorf("the channel returned an unknown answer %q", answer)
	return Unavailable
}

// ask puts req's question to p: offering "for the session" when req asks for it and p
// can (the question then says so), once-or-not otherwise.
func ask(ctx context.Context, p container.Prompter, req Request) (container.Answer, error) {
	if req.ForSession {
		if sp, ok := p.(container.SessionPrompter); ok {
			return sp.ConfirmForSession(ctx, question(req))
		}
		req.ForSession = false
	}
	return p.Confirm(ctx, question(req))
}

var errNoChannel = errors.New("the session has no interactive channel")

// ErrDeferred is what a Prompter returns when it cannot wait for the answer: the
// question travels to the client with the call's result (an MCP input_required result)
// and the client retries the call with the answer. The request is decided cancelled for
// now — nothing runs — and logged as deferred.
var ErrDeferred = errors.New("approval: the question is deferred to the client")

func sessionID(s *container.Session) string {
	if s == nil {
		return ""
	}
	return s.ID
}

// question is the question put to the user for req: it names the tool, the command, the
// justification, the workspace and the requested sandbox mode (with what it permits), so
// that a channel showing nothing but this text (an MCP elicitation with an empty schema,
// a terminal) gives the user everything needed to decide. A request that is not a
// sandbox escalation shows its reason instead.
//
// What the model wrote (the command, the justification) comes first and what dsh states
// comes last: the line naming the requested mode is the last one, just before the
// channel's question, so nothing drawn by a justification can stand between the real
// mode and the answer. Every field is shown escaped, collapsed and capped (show).
func question(req Request) string {
	mode, justification := req.Mode, req.Justification
	if mode == "" {
		mode, justification = parseEscalation(req.Reason)
	}
	tool := "a tool"
	if req.Tool != "" {
		tool = "the " + show(req.Tool, exact) + " tool"
	}
	if req.Source != "" {
		return policyQuestion(req, tool)
	}
	var b strings.Builder
	if mode == "" {
		fmt.Fprintf(&b, "dsh: %s asks for your approval.\n", tool)
		if req.Command != "" {
			fmt.Fprintf(&b, "\nCommand:\n%s\n", commandBlock(req.Command))
		}
		fmt.Fprintf(&b, "\nReason: %s\n", show(req.Reason, sentence))
		b.WriteString("\nAccept to allow this once; decline to refuse.")
		return b.String()
	}
	fmt.Fprintf(&b, "dsh: %s asks to run a command with wider sandbox access.\n", tool)
	b.WriteString("Accept to run this one call in the mode named last; decline to refuse (the command will not run).\n")
	if req.Command != "" {
		fmt.Fprintf(&b, "\nCommand:\n%s\n", commandBlock(req.Command))
	}
	if justification == "" {
		justification = "(none given)"
	}
	fmt.Fprintf(&b, "\nJustification: %s\n\n", show(justification, sentence))
	if req.Session != nil && req.Session.Cwd != "" {
		fmt.Fprintf(&b, "Workspace: %s\n", show(req.Session.Cwd, exact))
	}
	fmt.Fprintf(&b, "Requested sandbox mode: %s", show(mode, exact))
	if d := modeDescription(mode); d != "" {
		fmt.Fprintf(&b, " (%s)", d)
	}
	return b.String()
}

// policyQuestion is the question for a call a policy of the pre-execute waterfall asks
// about: the command, then the workspace, then — last, as dsh states it — the policy
// that asks and its reason. With ForSession it says what "for the session" allows.
func policyQuestion(req Request, tool string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "dsh: %s asks to run a command that needs your approval.\n", tool)
	if req.ForSession {
		b.WriteString("Allow it this once, or for the rest of this session (dsh then stops asking about what the policy named last allows); decline to refuse (the command will not run).\n")
	} else {
		b.WriteString("Accept to run it this once; decline to refuse (the command will not run).\n")
	}
	if req.Command != "" {
		fmt.Fprintf(&b, "\nCommand:\n%s\n", commandBlock(req.Command))
	}
	b.WriteString("\n")
	if req.Session != nil && req.Session.Cwd != "" {
		fmt.Fprintf(&b, "Workspace: %s\n", show(req.Session.Cwd, exact))
	}
	fmt.Fprintf(&b, "Policy: %s", show(req.Source, sentence))
	if req.Reason != "" {
		fmt.Fprintf(&b, " (%s)", show(req.Reason, sentence))
	}
	return b.String()
}

// parseEscalation splits "escalate sandbox to <mode>: <justification>".
func parseEscalation(reason string) (mode, justification string) {
	rest, ok := strings.CutPrefix(reason, "escalate sandbox to ")
	if !ok {
		return "", ""
	}
	mode, justification, ok = strings.Cut(rest, ": ")
	if !ok || shell.ModeRank(mode) < 0 {
		return "", ""
	}
	return mode, justification
}

func modeDescription(mode string) string {
	switch mode {
	case shell.ModeWorkspaceWrite:
		return "the command may modify files in the session workspace and temporary directories"
	case shell.ModeDangerFullAccess:
		return "no sandbox: the command may modify any file you can and use the network"
	case shell.ModeReadOnly:
		return "the command may read files but not modify them"
	}
	return ""
}

// commandBlock is a command as the question shows it (show, as a block), indented; a
// command longer than a terminal screen ends with a line saying so — a long head would
// otherwise scroll its first lines out of sight above the question.
func commandBlock(command string) string {
	text := indent(show(command, block))
	if n := strings.Count(text, "\n") + 1; n > screenLines {
		text += fmt.Sprintf("\n  [the command is %d lines long: read all of it, above, before you accept]", n)
	}
	return text
}

// screenLines is how many lines of a command the question shows without a note.
const screenLines = 20

// indent prefixes every line of s with two spaces so a multi-line command stays visibly
// one block.
func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
