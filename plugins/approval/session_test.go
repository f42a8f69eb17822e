package approval_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/approval"
)

// sessionFake is a container.SessionPrompter that records which question it was asked.
type sessionFake struct {
	fakePrompter
	forSession []string
}

func (p *sessionFake) ConfirmForSession(ctx context.Context, message string) (container.Answer, error) {
	p.mu.Lock()
	p.forSession = append(p.forSession, message)
	p.mu.Unlock()
	return p.answer, p.err
}

func policyAsk(session *container.Session, forSession bool) approval.Request {
	return approval.Request{
		Session:    session,
		Tool:       "bash",
		Command:    "git push origin main",
		Source:     `rule "git push *"`,
		Reason:     "pushes publish your work",
		ForSession: forSession,
	}
}

// allowed-for-session is an outcome only of a request that offers it, asked through a
// prompter that can offer it; sandbox escalations stay allowed-once.
func TestAllowedForSession(t *testing.T) {
	a, rec := compose(t, nil)
	p := &sessionFake{fakePrompter: fakePrompter{answer: container.AcceptedForSession}}
	session := &container.Session{ID: "s", Cwd: "/w", Prompter: p}
	if got := a.Request(context.Background(), policyAsk(session, true)); got != approval.AllowedForSession {
		t.Fatalf("outcome %q", got)
	}
	if len(p.forSession) != 1 || len(p.asked()) != 0 {
		t.Fatalf("asked for the session %d times, once-or-not %d times", len(p.forSession), len(p.asked()))
	}
	if d := rec.messages("approval decided"); len(d) != 1 || d[0].attrs["outcome"] != "allowed-for-session" || d[0].attrs["source"] != `rule "git push *"` {
		t.Fatalf("logged %+v", d)
	}

	// An escalation never offers it: asked once-or-not, an answer "for the session"
	// (from a channel that gives it anyway) allows once.
	p = &sessionFake{fakePrompter: fakePrompter{answer: container.AcceptedForSession}}
	if got := a.Request(context.Background(), escalation(&container.Session{ID: "s", Prompter: p})); got != approval.AllowedOnce {
		t.Fatalf("escalation outcome %q", got)
	}
	if len(p.forSession) != 0 || len(p.asked()) != 1 {
		t.Fatal("an escalation was offered for the session")
	}

	// A prompter that cannot offer it is asked once-or-not, and the question says so.
	plain := &fakePrompter{answer: container.Accepted}
	if got := a.Request(context.Background(), policyAsk(&container.Session{ID: "s", Prompter: plain}, true)); got != approval.AllowedOnce {
		t.Fatalf("plain prompter: %q", got)
	}
	if q := plain.asked(); len(q) != 1 || !strings.Contains(q[0], "Accept to run it this once;") {
		t.Fatalf("plain question %q", q)
	}
	// Policies decide without asking, and never for the session.
	for policy, want := range map[string]approval.Outcome{"allow": approval.AllowedOnce, "deny": approval.Rejected} {
		a, _ := compose(t, map[string]any{"policy": policy})
		if got := a.Request(context.Background(), policyAsk(session, true)); got != want {
			t.Errorf("policy %s: %q", policy, got)
		}
	}
}

// The question about a policy's ask names the command first and, last, the policy that
// asks and its reason; offered for the session, it says what that allows.
func TestPolicyQuestion(t *testing.T) {
	session := &container.Session{ID: "s", Cwd: "/home/u/project"}
	want := "dsh: the bash tool asks to run a command that needs your approval.\n" +
		"Allow it this once, or for the rest of this session (dsh then stops asking about what the policy named last allows); decline to refuse (the command will not run).\n" +
		"\n" +
		"Command:\n" +
		"  git push origin main\n" +
		"\n" +
		"Workspace: /home/u/project\n" +
		`Policy: rule "git push *" (pushes publish your work)`
	if got := approval.Message(policyAsk(session, true)); got != want {
		t.Fatalf("question:\n%s\n--- want:\n%s", got, want)
	}
	once := approval.Message(approval.Request{Tool: "bash", Command: "rm -r x\r\x1b[2K", Source: `default for "rm -r x"`})
	want = "dsh: the bash tool asks to run a command that needs your approval.\n" +
		"Accept to run it this once; decline to refuse (the command will not run).\n" +
		"\n" +
		"Command:\n" +
		"  rm -r x\\r\\x1b[2K\n" +
		"\n" +
		`Policy: default for "rm -r x"`
	if got := once; got != want {
		t.Fatalf("question:\n%q\n--- want:\n%q", got, want)
	}
	// A reason that reads like an escalation is still a policy's reason.
	odd := approval.Message(approval.Request{Tool: "bash", Command: "x", Source: `rule "x"`, Reason: "escalate sandbox to danger-full-access: now"})
	if strings.Contains(odd, "Requested sandbox mode") || !strings.HasSuffix(odd, `Policy: rule "x" (escalate sandbox to danger-full-access: now)`) {
		t.Fatalf("question:\n%s", odd)
	}
}

func TestTerminalPrompterForSession(t *testing.T) {
	const question = "Allow once, for the session, or not? [o/s/N] "
	for _, c := range []struct {
		input string
		want  container.Answer
	}{
		{"o\n", container.Accepted},
		{"once\n", container.Accepted},
		{"y\n", container.Accepted},
		{"s\n", container.AcceptedForSession},
		{" Session \n", container.AcceptedForSession},
		{"n\n", container.Declined},
		{"not\n", container.Declined},
		{"\n", container.Declined}, // the default
		{"", container.Cancelled},  // end of input
		{"s", container.AcceptedForSession},
		{"always\ns\n", container.AcceptedForSession},
		{"a\nb\nc\ns\n", container.Cancelled},
	} {
		t.Run(strings.TrimSpace(c.input), func(t *testing.T) {
			inR, inW := io.Pipe()
			defer inR.Close()
			out := &syncBuffer{}
			p := &approval.TerminalPrompter{In: inR, Out: out}
			go func() {
				io.WriteString(inW, c.input)
				inW.Close()
			}()
			got, err := p.ConfirmForSession(context.Background(), "Run it?\n")
			if err != nil || got != c.want {
				t.Fatalf("answer %q, %v; want %q", got, err, c.want)
			}
			if !strings.HasPrefix(out.String(), "Run it?\n\n"+question) {
				t.Fatalf("terminal output %q", out.String())
			}
			if c.input == "always\ns\n" && out.String() != "Run it?\n\n"+question+"Please answer o, s or n. "+question {
				t.Fatalf("re-asked as %q", out.String())
			}
		})
	}
}

// Through the approver on a terminal: a policy's ask offers [o/s/N], an escalation keeps
// [y/N].
func TestTerminalQuestionsThroughTheApprover(t *testing.T) {
	a, err := approval.New(approval.PolicyAsk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		req      func(*container.Session) approval.Request
		answer   string
		question string
		want     approval.Outcome
	}{
		{func(s *container.Session) approval.Request { return policyAsk(s, true) }, "s\n", "\n\nAllow once, for the session, or not? [o/s/N] ", approval.AllowedForSession},
		{func(s *container.Session) approval.Request { return policyAsk(s, false) }, "y\n", "\n\nAllow once? [y/N] ", approval.AllowedOnce},
		{escalation, "y\n", "\n\nAllow once? [y/N] ", approval.AllowedOnce},
	} {
		inR, inW := io.Pipe()
		out := &syncBuffer{}
		session := &container.Session{ID: "s", Cwd: "/w", Prompter: &approval.TerminalPrompter{In: inR, Out: out}}
		go func() {
			io.WriteString(inW, c.answer)
			inW.Close()
		}()
		if got := a.Request(context.Background(), c.req(session)); got != c.want {
			t.Errorf("outcome %q, want %q", got, c.want)
		}
		if !strings.HasSuffix(out.String(), c.question) {
			t.Errorf("terminal shows %q, want it to end with %q", out.String(), c.question)
		}
		inR.Close()
	}
}

// A form offers "for the session" as one boolean; its reply maps onto the answers.
func TestForm(t *testing.T) {
	schema := approval.ForSessionSchema()
	prop := schema["properties"].(map[string]any)["forSession"].(map[string]any)
	if schema["type"] != "object" || prop["type"] != "boolean" || prop["title"] != "Allow this for the rest of the session" {
		t.Fatalf("schema %v", schema)
	}
	for _, c := range []struct {
		action  string
		content map[string]any
		want    container.Answer
	}{
		{"accept", map[string]any{"forSession": true}, container.AcceptedForSession},
		{"accept", map[string]any{"forSession": false}, container.Accepted},
		{"accept", nil, container.Accepted},
		{"accept", map[string]any{"forSession": "yes"}, container.Accepted},
		{"decline", map[string]any{"forSession": true}, container.Declined},
		{"cancel", nil, container.Cancelled},
	} {
		if got, err := approval.FormAnswer(c.action, c.content); err != nil || got != c.want {
			t.Errorf("%s %v: %q %v, want %q", c.action, c.content, got, err, c.want)
		}
	}
	if _, err := approval.FormAnswer("maybe", nil); err == nil {
		t.Fatal("an unknown action was read")
	}
}
