package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The rules end to end: `dsh serve` with a rules row (its own rules, a Claude Code
// settings file and a Codex rules file) driven by the Go SDK client on each lane — the
// session lane over stdio and over HTTP, the stateless lane (2026-07-28) over HTTP —
// with a scripted user answering the approval questions.

// policyProfile extends a built-in profile with a rules row importing both formats.
const policyProfileYAML = `extends: %s
plugins:
  - id: rules
    name: rules
    config:
      rules:
        - id: no-rm
          deny: rm *
          reason: nothing is removed here
        - ask: touch *
      claudeSettings: [claude.json]
      codexRules: [codex.rules]
`

// A real Claude Code settings file: permissions entries for Bash and other tools.
const claudeSettingsJSON = `{
  "$schema": "https://json.schemastore.org/claude-code-settings.json",
  "permissions": {
    "allow": ["Bash(npm run test:*)", "Bash(git status)", "Read(~/.zshrc)"],
    "ask": ["Bash(mkdir:*)"],
    "deny": ["Bash(curl:*)", "WebFetch(domain:example.com)"]
  }
}
`

// A Codex .rules file, with the examples Codex checks.
const codexRulesFile = `# Codex execpolicy rules.
prefix_rule(
    pattern = ["git", "push"],
    decision = "forbidden",
    justification = "pushes go through review",
    match = ["git push origin main"],
    not_match = ["git status"],
)
prefix_rule(
    pattern = ["cp", ["-r", "-R"]],
    decision = "prompt",
    justification = "recursive copies can be large",
    match = ["cp -r a b"],
)
`

// writePolicyProfile writes the profile (extending base) and its imports into a fresh
// directory and returns the profile's path.
func writePolicyProfile(t *testing.T, base string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range map[string]string{
		"dsh.yaml":    fmt.Sprintf(policyProfileYAML, base),
		"claude.json": claudeSettingsJSON,
		"codex.rules": codexRulesFile,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "dsh.yaml")
}

// user is the scripted user behind a client's elicitation handler: it gives the same
// answer to every question until told otherwise, and keeps the questions.
type user struct {
	mu     sync.Mutex
	answer *mcp.ElicitResult
	asked  []*mcp.ElicitParams
}

func (u *user) elicit(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.asked = append(u.asked, req.Params)
	if u.answer == nil {
		return &mcp.ElicitResult{Action: "cancel"}, nil
	}
	return u.answer, nil
}

// says sets the answer: "accept" (forSession ticks the form's box), "decline", "cancel".
func (u *user) says(action string, forSession bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.answer = &mcp.ElicitResult{Action: action}
	if forSession {
		u.answer.Content = map[string]any{"forSession": true}
	}
}

func (u *user) questions() []*mcp.ElicitParams {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*mcp.ElicitParams(nil), u.asked...)
}

// mcpClient is one harness session's client, on any lane.
type mcpClient struct{ cs *mcp.ClientSession }

func (c mcpClient) call(t *testing.T, name string, args map[string]any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s %v: %v", name, args, err)
	}
	var text strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return text.String(), res.IsError
}

func (c mcpClient) bash(t *testing.T, command string) (string, bool) {
	t.Helper()
	return c.call(t, "bash", map[string]any{"command": command, "description": "Run a test command"})
}

// connectMCP connects a client answering elicitations through u (nil: no elicitation
// capability) with transport, on revision ("" negotiates the newest: the stateless lane).
func connectMCP(t *testing.T, transport mcp.Transport, revision string, u *user) mcpClient {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if u != nil {
		opts.ElicitationHandler = u.elicit
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "e2e-policy", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var so *mcp.ClientSessionOptions
	if revision != "" {
		so = &mcp.ClientSessionOptions{ProtocolVersion: revision}
	}
	cs, err := cl.Connect(ctx, transport, so)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	want := revision
	if want == "" {
		want = statelessRevision
	}
	if got := cs.InitializeResult().ProtocolVersion; got != want {
		t.Fatalf("negotiated %q, want %q", got, want)
	}
	return mcpClient{cs}
}

// policyLane serves a profile on one lane; each connect is a new harness session.
type policyLane struct {
	name    string
	connect func(t *testing.T, u *user) mcpClient
}

// laneNames are the names of policyLanes' lanes, in order.
var laneNames = []string{"stdio", "http", "stateless"}

// policyTokens are the bearer tokens of the policy tests' HTTP servers: each stateless
// connection of a test takes the next, so that each is another principal.
var policyTokens = []string{"e2e-policy-token-1-abcdef0123", "e2e-policy-token-2-abcdef0123", "e2e-policy-token-3-abcdef0123", "e2e-policy-token-4-abcdef0123"}

// policyLanes returns the three lanes serving args (a profile, a workspace): each its
// own `dsh serve`, started on first use.
func policyLanes(args ...string) []policyLane {
	stdio := func(t *testing.T, u *user) mcpClient {
		cmd := exec.Command(dshBin, append([]string{"serve"}, args...)...)
		return connectMCP(t, &mcp.CommandTransport{Command: cmd}, sessionRevision, u)
	}
	var url string
	server := func(t *testing.T) string {
		if url == "" {
			url = startHTTPServe(t, append(args, "--token-file", writeTokens(t, policyTokens...))...).url
		}
		return url
	}
	session := func(t *testing.T, u *user) mcpClient {
		tr := &mcp.StreamableClientTransport{Endpoint: server(t), HTTPClient: authClient(policyTokens[0])}
		return connectMCP(t, tr, sessionRevision, u)
	}
	next := 0
	stateless := func(t *testing.T, u *user) mcpClient {
		if next == len(policyTokens) {
			t.Fatal("out of principals")
		}
		tr := &mcp.StreamableClientTransport{Endpoint: server(t), HTTPClient: authClient(policyTokens[next])}
		next++
		return connectMCP(t, tr, "", u)
	}
	return []policyLane{{laneNames[0], stdio}, {laneNames[1], session}, {laneNames[2], stateless}}
}

// forSessionSchema is approval.ForSessionSchema as JSON.
const forSessionSchema = `{"properties":{"forSession":{"default":false,"title":"Allow this for the rest of the session","type":"boolean"}},"type":"object"}`

func schemaJSON(p *mcp.ElicitParams) string {
	data, _ := json.Marshal(p.RequestedSchema)
	return string(data)
}

// TestPolicyEndToEnd: on each lane, a deny rule refuses with the documented text and runs
// nothing; an ask accepted once runs once and asks again; accepted for the session it
// no longer asks in that session (about anything its rule matches) but asks in another;
// declined, cancelled and no channel refuse with their texts; the imported Claude Code
// and Codex rules are enforced.
func TestPolicyEndToEnd(t *testing.T) {
	profile := writePolicyProfile(t, "default")
	for i, name := range laneNames {
		t.Run(name, func(t *testing.T) {
			ws := t.TempDir()
			lane := policyLanes("--profile", profile, "--workspace", ws)[i]
			exists := func(name string) bool { _, err := os.Stat(filepath.Join(ws, name)); return err == nil }
			read := func(name string) string { data, _ := os.ReadFile(filepath.Join(ws, name)); return string(data) }
			u := &user{}
			c := lane.connect(t, u)

			// Deny: nothing runs, nobody is asked.
			if text, isErr := c.bash(t, "touch denied && rm -f x"); text != `Error: command denied by policy: rule "no-rm" (nothing is removed here)` || !isErr {
				t.Errorf("deny: %q isError=%v", text, isErr)
			}
			if exists("denied") || len(u.questions()) != 0 {
				t.Errorf("the denied command ran (%v) or asked (%d)", exists("denied"), len(u.questions()))
			}

			// Ask, accepted once: runs once; the next call asks again.
			u.says("accept", false)
			for i := 1; i <= 2; i++ {
				if text, isErr := c.bash(t, "touch once && echo ran >> once.log"); text != "(no output)" || isErr {
					t.Fatalf("accepted once (%d): %q isError=%v", i, text, isErr)
				}
				if got := read("once.log"); got != strings.Repeat("ran\n", i) || len(u.questions()) != i {
					t.Fatalf("after accepting %d times: once.log %q, %d questions", i, got, len(u.questions()))
				}
			}
			q := u.questions()[0]
			if schemaJSON(q) != forSessionSchema {
				t.Errorf("the question's schema %s, want %s", schemaJSON(q), forSessionSchema)
			}
			for _, part := range []string{"touch once && echo ran >> once.log", `Policy: rule "touch *"`, "Workspace: " + ws} {
				if !strings.Contains(q.Message, part) {
					t.Errorf("the question lacks %q:\n%s", part, q.Message)
				}
			}

			// Declined and cancelled: nothing runs.
			u.says("decline", false)
			if text, isErr := c.bash(t, "touch declined"); text != `Error: the user did not allow this command (rule "touch *")` || !isErr || exists("declined") {
				t.Errorf("declined: %q isError=%v, ran %v", text, isErr, exists("declined"))
			}
			u.says("cancel", false)
			if text, isErr := c.bash(t, "touch cancelled"); text != `Error: approval of this command was cancelled (rule "touch *")` || !isErr || exists("cancelled") {
				t.Errorf("cancelled: %q isError=%v, ran %v", text, isErr, exists("cancelled"))
			}

			// The imports: Claude Code's deny and ask entries, Codex's forbidden and prompt rules.
			for command, want := range map[string]string{
				"curl -s http://127.0.0.1:1/x > fetched": `Error: command denied by policy: rule "Bash(curl:*)"`,
				"mkdir made":                             `Error: approval of this command was cancelled (rule "Bash(mkdir:*)")`,
				"git push origin main":                   `Error: command denied by policy: rule "git push" (pushes go through review)`,
				"cp -r /etc/hostname copied":             `Error: approval of this command was cancelled (rule "cp (-r|-R)")`,
			} {
				if text, isErr := c.bash(t, command); text != want || !isErr {
					t.Errorf("%s: %q isError=%v, want %q", command, text, isErr, want)
				}
			}
			if exists("fetched") || exists("made") || exists("copied") {
				t.Error("a command refused by an imported rule ran")
			}

			// For the session: this session stops asking about what the rule matches.
			u.says("accept", true)
			asked := len(u.questions())
			for _, command := range []string{"touch kept && echo ran >> session.log", "touch kept && echo ran >> session.log", "touch other"} {
				if text, isErr := c.bash(t, command); text != "(no output)" || isErr {
					t.Fatalf("for the session, %s: %q isError=%v", command, text, isErr)
				}
			}
			if got := read("session.log"); got != "ran\nran\n" || !exists("other") || len(u.questions()) != asked+1 {
				t.Errorf("for the session: session.log %q, other %v, %d questions (want %d)", got, exists("other"), len(u.questions()), asked+1)
			}
			// Another session asks again.
			u2 := &user{}
			u2.says("decline", false)
			c2 := lane.connect(t, u2)
			if text, _ := c2.bash(t, "touch kept"); text != `Error: the user did not allow this command (rule "touch *")` || len(u2.questions()) != 1 {
				t.Errorf("another session: %q, %d questions", text, len(u2.questions()))
			}

			// No channel: a client without elicitation.
			c3 := lane.connect(t, nil)
			if text, isErr := c3.bash(t, "touch unasked"); text != `Error: this command needs approval (rule "touch *"), but no approval channel is available` || !isErr || exists("unasked") {
				t.Errorf("no channel: %q isError=%v, ran %v", text, isErr, exists("unasked"))
			}
		})
	}
}

// TestPolicyAskThenEscalation: a call that a rule asks about and that escalates the
// sandbox asks the user twice — the rule's question (offering "for the session"), then
// the escalation (once or not) — and runs once when both are accepted; on the stateless
// lane each question gets its own answer across the retries (it used to ask the first
// one again on every retry).
func TestPolicyAskThenEscalation(t *testing.T) {
	profile := writePolicyProfile(t, "sandbox")
	for i, name := range laneNames {
		t.Run(name, func(t *testing.T) {
			ws := t.TempDir()
			lane := policyLanes("--profile", profile, "--workspace", ws, "--sandbox-mode", "read-only")[i]
			u := &user{}
			u.says("accept", false)
			c := lane.connect(t, u)
			text, isErr := c.call(t, "bash", map[string]any{"command": "touch marker && echo ran >> marker.log", "description": "Create a marker",
				"sandbox_permissions": "workspace-write", "justification": "The marker belongs in the workspace."})
			if text != "(no output)" || isErr {
				t.Fatalf("accepted twice: %q isError=%v", text, isErr)
			}
			if data, _ := os.ReadFile(filepath.Join(ws, "marker.log")); string(data) != "ran\n" {
				t.Errorf("marker.log %q", data)
			}
			qs := u.questions()
			if len(qs) != 2 {
				t.Fatalf("%d questions, want 2", len(qs))
			}
			if schemaJSON(qs[0]) != forSessionSchema || !strings.Contains(qs[0].Message, `Policy: rule "touch *"`) {
				t.Errorf("the first question (%s):\n%s", schemaJSON(qs[0]), qs[0].Message)
			}
			if schemaJSON(qs[1]) != `{"properties":{},"type":"object"}` || !strings.Contains(qs[1].Message, "Requested sandbox mode: workspace-write") {
				t.Errorf("the second question (%s):\n%s", schemaJSON(qs[1]), qs[1].Message)
			}
		})
	}
}

// TestTypeScriptClientPolicy: the TypeScript client on the stateless lane answers a rule's
// question "for the session" (the forSession boolean of the form in input_required) and
// the escalation once: the first call asks both and runs, the second asks only the
// escalation (the rule remembered) and runs.
func TestTypeScriptClientPolicy(t *testing.T) {
	node, script := nodeScript(t, "ts-policy.mjs", "@modelcontextprotocol/client")
	ws := t.TempDir()
	srv := startHTTPServe(t, "--profile", writePolicyProfile(t, "sandbox"), "--workspace", ws, "--sandbox-mode", "read-only",
		"--token-file", writeTokens(t, testToken))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "DSH_URL="+srv.url, "DSH_TOKEN="+testToken)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	var got struct {
		Error string
		Asked []struct {
			Message       string
			OffersSession bool `json:"offersSession"`
		}
		Results []struct {
			Text    string
			IsError bool `json:"isError"`
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output %s: %v", out, err)
	}
	if got.Error != "" {
		t.Fatalf("the TypeScript client failed: %s\nobserved so far: %s\nstderr: %s", got.Error, out, stderr.String())
	}
	if len(got.Results) != 2 || got.Results[0].Text != "(no output)" || got.Results[1].Text != "(no output)" || got.Results[0].IsError || got.Results[1].IsError {
		t.Errorf("results %+v", got.Results)
	}
	var asked []string
	for _, q := range got.Asked {
		kind := "escalation"
		if strings.Contains(q.Message, `Policy: rule "touch *"`) {
			kind = "rule"
		}
		asked = append(asked, fmt.Sprintf("%s:%v", kind, q.OffersSession))
	}
	if want := []string{"rule:true", "escalation:false", "escalation:false"}; strings.Join(asked, " ") != strings.Join(want, " ") {
		t.Errorf("questions %v, want %v", asked, want)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "marker.log")); string(data) != "ran\nran\n" {
		t.Errorf("marker.log %q", data)
	}
}
