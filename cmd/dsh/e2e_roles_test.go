package main_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rolesProfileYAML confines commands (workspace-write by default) and gives three roles:
// reader (bash and job_output, at most workspace-write), auditor (bash alone, read-only)
// and writer (everything).
const rolesProfileYAML = `extends: sandbox
plugins:
  - id: roles
    name: roles
    config:
      roles:
        reader:
          tools: [bash, job_output]
          maxMode: workspace-write
        auditor:
          tools: [bash]
          maxMode: read-only
        writer: {}
`

// Tokens of the roles tests, one line each: "<token> <role>".
const (
	readerToken  = "e2e-reader-token-0123456789"
	writerToken  = "e2e-writer-token-0123456789"
	auditorToken = "e2e-auditor-token-012345678"
)

// roleClient is a client of one role's token, with what the server pushed.
type roleClient struct {
	mcpClient
	changes *recorder
	asked   *user
}

// connectRole connects with token on revision ("": the stateless lane), recording
// tools/list_changed and answering (and counting) elicitations.
func connectRole(t *testing.T, url, token, revision string) roleClient {
	t.Helper()
	rc := roleClient{changes: &recorder{}, asked: &user{}}
	rc.asked.says("accept", false)
	cl := mcp.NewClient(&mcp.Implementation{Name: "e2e-roles", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler:     rc.asked.elicit,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { rc.changes.add("tools") },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var so *mcp.ClientSessionOptions
	if revision != "" {
		so = &mcp.ClientSessionOptions{ProtocolVersion: revision}
	}
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: authClient(token)}, so)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	rc.mcpClient = mcpClient{cs}
	return rc
}

// tools returns the session's tools by name.
func (c roleClient) tools(t *testing.T) map[string]*mcp.Tool {
	t.Helper()
	res, err := c.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl
	}
	return out
}

func toolNamesOf(m map[string]*mcp.Tool) []string {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// escalations are the sandbox modes a bash definition offers (nil: none).
func escalations(t *testing.T, bash *mcp.Tool) []string {
	t.Helper()
	data, _ := json.Marshal(bash.InputSchema)
	var schema struct {
		Properties map[string]struct {
			Enum []string `json:"enum"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	p, ok := schema.Properties["sandbox_permissions"]
	if !ok {
		return nil
	}
	return p.Enum
}

// TestRolesOverHTTP: two principals with roles from their token lines, on both lanes:
// each lists only its role's tools, the reader's bash schema offers no mode above its
// ceiling (and the auditor's none at all, while its prompt states read-only), a call to a
// hidden tool is refused with the documented text, an escalation past the ceiling is refused
// without asking, and a roles reload that changes what a session sees sends it
// tools/list_changed.
func TestRolesOverHTTP(t *testing.T) {
	dir := t.TempDir()
	profile := filepath.Join(dir, "dsh.yaml")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(profile+".tmp", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(profile+".tmp", profile); err != nil {
			t.Fatal(err)
		}
	}
	write(rolesProfileYAML)
	ws := t.TempDir()
	tokens := writeTokens(t, readerToken+" reader", writerToken+"   writer", auditorToken+"\tauditor")
	srv := startHTTPServe(t, "--profile", profile, "--workspace", ws, "--token-file", tokens)

	for _, lane := range []struct{ name, revision string }{{"session", sessionRevision}, {"stateless", ""}} {
		t.Run(lane.name, func(t *testing.T) {
			reader := connectRole(t, srv.url, readerToken, lane.revision)
			writer := connectRole(t, srv.url, writerToken, lane.revision)
			auditor := connectRole(t, srv.url, auditorToken, lane.revision)

			rt, wt, at := reader.tools(t), writer.tools(t), auditor.tools(t)
			if got := toolNamesOf(rt); !slices.Equal(got, []string{"bash", "job_output"}) {
				t.Errorf("reader's tools %v", got)
			}
			if got := toolNamesOf(wt); !slices.Equal(got, []string{"bash", "job_kill", "job_list", "job_output", "job_write"}) {
				t.Errorf("writer's tools %v", got)
			}
			if got := toolNamesOf(at); !slices.Equal(got, []string{"bash"}) {
				t.Errorf("auditor's tools %v", got)
			}
			if got := escalations(t, rt["bash"]); !slices.Equal(got, []string{"workspace-write"}) {
				t.Errorf("reader's bash offers %v", got)
			}
			if got := escalations(t, wt["bash"]); !slices.Equal(got, []string{"workspace-write", "danger-full-access"}) {
				t.Errorf("writer's bash offers %v", got)
			}
			if got := escalations(t, at["bash"]); got != nil || strings.Contains(at["bash"].Description, "sandbox_permissions") {
				t.Errorf("auditor's bash offers %v:\n%s", got, at["bash"].Description)
			}
			if got := auditor.cs.InitializeResult().Instructions; !strings.Contains(got, "Current DSH file policy: read-only.") {
				t.Errorf("auditor's prompt:\n%s", got)
			}
			if got := writer.cs.InitializeResult().Instructions; !strings.Contains(got, "Current DSH file policy: workspace-write.") {
				t.Errorf("writer's prompt:\n%s", got)
			}

			// A hidden tool is refused by name and role.
			if text, isErr := reader.call(t, "job_list", map[string]any{}); text != `Error: tool "job_list" is not available to this session (role "reader")` || !isErr {
				t.Errorf("reader's job_list: %q isError=%v", text, isErr)
			}
			if text, _ := writer.call(t, "job_list", map[string]any{}); text != "(no background jobs)" {
				t.Errorf("writer's job_list: %q", text)
			}

			// Past the ceiling: refused, nobody asked, nothing ran.
			marker := filepath.Join(ws, "escalated-"+lane.name)
			text, isErr := reader.call(t, "bash", map[string]any{"command": "touch " + marker, "description": "Create a marker",
				"sandbox_permissions": "danger-full-access", "justification": "It needs everything."})
			if text != `Error: sandbox escalation to "danger-full-access" exceeds the "reader" role's ceiling "workspace-write"` || !isErr {
				t.Errorf("reader's escalation: %q isError=%v", text, isErr)
			}
			if _, err := os.Stat(marker); err == nil || len(reader.asked.questions()) != 0 {
				t.Errorf("the refused escalation ran or asked (%d questions)", len(reader.asked.questions()))
			}
			// The auditor's commands run read-only, whatever the profile's default.
			if text, _ := auditor.bash(t, "touch "+marker); !strings.Contains(text, "denied under read-only mode") {
				t.Errorf("auditor's write: %q", text)
			}
		})
	}

	// A reload that gives the reader job_list changes its list, not the tool set: the
	// reader's sessions are told, on both lanes (the stateless client listens through
	// subscriptions/listen).
	reader := connectRole(t, srv.url, readerToken, sessionRevision)
	principal := connectRole(t, srv.url, readerToken, "")
	for _, c := range []roleClient{reader, principal} {
		_ = c.tools(t)
	}
	write(strings.Replace(rolesProfileYAML, "tools: [bash, job_output]", "tools: [bash, job_output, job_list]", 1))
	waitFor(t, 20*time.Second, "tools/list_changed on the session lane", func() bool { return reader.changes.has("tools") })
	waitFor(t, 20*time.Second, "tools/list_changed on the stateless lane", func() bool { return principal.changes.has("tools") })
	for _, c := range []roleClient{reader, principal} {
		if got := toolNamesOf(c.tools(t)); !slices.Equal(got, []string{"bash", "job_list", "job_output"}) {
			t.Errorf("reader's tools after the reload %v", got)
		}
		if text, _ := c.call(t, "job_list", map[string]any{}); text != "(no background jobs)" {
			t.Errorf("reader's job_list after the reload: %q", text)
		}
	}
}

// TestServeRefusesTokenRoles: `dsh serve` refuses to start (exit 2), naming the line,
// when a token line names a role the profile does not define, a token has two roles, or
// a line names any role without a roles plugin.
func TestServeRefusesTokenRoles(t *testing.T) {
	dir := t.TempDir()
	profile := filepath.Join(dir, "dsh.yaml")
	if err := os.WriteFile(profile, []byte(rolesProfileYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	tokens := writeTokens(t, readerToken+" reader", "", writerToken+" admin")
	_, stderr, code := runDsh(t, dir, "serve", "--http", "127.0.0.1:0", "--profile", profile, "--workspace", dir, "--token-file", tokens)
	if want := "--token-file " + tokens + ": line 3: role admin: the profile defines no such role (it has: auditor, reader, writer)"; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("an undefined role: exit %d, stderr:\n%s\nwant %q", code, stderr, want)
	}
	if strings.Contains(stderr, writerToken) {
		t.Errorf("the error shows the token:\n%s", stderr)
	}
	tokens = writeTokens(t, readerToken+" reader", writerToken+" writer", readerToken+" writer")
	_, stderr, code = runDsh(t, dir, "serve", "--http", "127.0.0.1:0", "--profile", profile, "--workspace", dir, "--token-file", tokens)
	if want := "--token-file " + tokens + ": line 3 repeats the token of line 1 with another role"; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("a token with two roles: exit %d, stderr:\n%s\nwant %q", code, stderr, want)
	}
	tokens = writeTokens(t, readerToken, writerToken+" writer")
	_, stderr, code = runDsh(t, dir, "serve", "--http", "127.0.0.1:0", "--workspace", dir, "--token-file", tokens)
	if want := "--token-file " + tokens + `: line 2: role writer: profile "default" composes no active roles plugin (see dsh status)`; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("no roles plugin: exit %d, stderr:\n%s\nwant %q", code, stderr, want)
	}
}
