package main_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// statelessClient is a Go SDK client that negotiates the stateless revision, recording what
// the server pushes.
type statelessClient struct {
	*mcp.ClientSession
	updates *recorder // resources/updated: "<uri>|<notice>"
	changes *recorder
}

type statelessOptions struct {
	elicit   func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)
	progress func(*mcp.ProgressNotificationClientRequest)
	noListen bool // no tool-list handler: the client keeps no subscriptions/listen open
}

func connectStateless(t *testing.T, transport mcp.Transport, o statelessOptions) *statelessClient {
	t.Helper()
	c := &statelessClient{updates: &recorder{}, changes: &recorder{}}
	opts := &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			notice, _ := r.Params.Meta["dev.dsh/notice"].(string)
			c.updates.add(r.Params.URI + "|" + notice)
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { c.changes.add("tools") },
		ElicitationHandler:     o.elicit,
	}
	if o.noListen {
		opts.ToolListChangedHandler = nil
	}
	if o.progress != nil {
		opts.ProgressNotificationHandler = func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { o.progress(r) }
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "e2e-stateless", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := cl.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != statelessRevision {
		t.Fatalf("negotiated %q, want %q", got, statelessRevision)
	}
	c.ClientSession = cs
	return c
}

func httpStateless(t *testing.T, url, token string, o statelessOptions) *statelessClient {
	t.Helper()
	return connectStateless(t, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: authClient(token)}, o)
}

// call runs a tool and returns its text, isError and structured content.
func (c *statelessClient) call(t *testing.T, name string, args map[string]any) (string, bool, any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s %v: %v", name, args, err)
	}
	var text strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return text.String(), res.IsError, res.StructuredContent
}

func (c *statelessClient) text(t *testing.T, name string, args map[string]any) string {
	t.Helper()
	text, _, _ := c.call(t, name, args)
	return text
}

// TestStatelessLaneOverHTTP drives the 2026-07-28 lane with the Go SDK client:
// discover, tools, bash, one harness session per principal across connections, jobs
// fenced from other principals, and the completion notice through subscriptions/listen.
func TestStatelessLaneOverHTTP(t *testing.T) {
	ws := t.TempDir()
	const otherToken = "e2e-other-token-fedcba9876543210"
	srv := startHTTPServe(t, "--workspace", ws, "--token-file", writeTokens(t, testToken, otherToken))

	a := httpStateless(t, srv.url, testToken, statelessOptions{})
	wantPrompt, _, _ := runDsh(t, ws, "prompt", "--workspace", ws)
	if got := a.InitializeResult().Instructions; got+"\n" != wantPrompt {
		t.Errorf("discover instructions:\n%q\nwant (dsh prompt):\n%q", got, wantPrompt)
	}
	if v := a.InitializeResult().ServerInfo; v == nil || v.Name != "dsh" || v.Version == "" || v.Version == "dev" {
		t.Errorf("serverInfo = %+v", v)
	}
	tl, err := a.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tl.Tools {
		names = append(names, tool.Name)
	}
	if want := []string{"bash", "job_kill", "job_list", "job_output", "job_write"}; !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}

	text, isErr, value := a.call(t, "bash", map[string]any{"command": "echo hello; pwd", "description": "Say hello"})
	if text != "hello\n"+ws+"\n" || isErr {
		t.Errorf("bash: %q isError=%v", text, isErr)
	}
	if v, _ := value.(map[string]any); v["kind"] != "foreground" || v["exitCode"] != float64(0) {
		t.Errorf("structured content = %v", value)
	}
	if text := a.text(t, "bash", map[string]any{"command": "exit 3", "description": "Fail"}); text != "(no output)\n[exit code: 3]" {
		t.Errorf("exit 3: %q", text)
	}

	// One principal, one harness session: a second connection shares it.
	sid := a.text(t, "bash", map[string]any{"command": "echo $DSH_SESSION_ID", "description": "Show the session id"})
	b := httpStateless(t, srv.url, testToken, statelessOptions{})
	if got := b.text(t, "bash", map[string]any{"command": "echo $DSH_SESSION_ID", "description": "Show the session id"}); got != sid || len(strings.TrimSpace(sid)) != 16 {
		t.Errorf("DSH_SESSION_ID: %q on the second connection, %q on the first", got, sid)
	}

	// The completion notice: a subscription to dsh://notices.
	if err := a.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "dsh://notices"}); err != nil {
		t.Fatal(err)
	}
	if got := a.text(t, "bash", map[string]any{"command": "echo started; sleep 0.5; echo done", "description": "Run a short job", "run_in_background": true}); got != "started background job bash-1" {
		t.Fatalf("background start: %q", got)
	}
	notice := "background job bash-1 (bash: echo started; sleep 0.5; echo done) finished [status: completed, exit code: 0]. Read its output with job_output."
	waitFor(t, 20*time.Second, "the completion notice", func() bool { return a.updates.has("dsh://notices|" + notice) })
	res, err := a.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "dsh://notices"})
	if err != nil {
		t.Fatal(err)
	}
	var notices struct {
		Notices []struct {
			Seq  int    `json:"seq"`
			Text string `json:"text"`
		} `json:"notices"`
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &notices); err != nil || len(notices.Notices) != 1 || notices.Notices[0].Text != notice {
		t.Errorf("dsh://notices = %s (%v)", res.Contents[0].Text, err)
	}

	// The job, read from the other connection of the same principal.
	if got := b.text(t, "job_output", map[string]any{"job_id": "bash-1"}); got != "started\ndone\n[status: completed, exit code: 0]" {
		t.Errorf("job_output from the second connection = %q", got)
	}

	// Another principal is fenced off.
	o := httpStateless(t, srv.url, otherToken, statelessOptions{})
	if got := o.text(t, "bash", map[string]any{"command": "echo $DSH_SESSION_ID", "description": "Show the session id"}); got == sid {
		t.Errorf("two principals share DSH_SESSION_ID %q", got)
	}
	if got := a.text(t, "bash", map[string]any{"command": "sleep 60", "description": "Sleep", "run_in_background": true}); got != "started background job bash-2" {
		t.Fatalf("start: %q", got)
	}
	for _, tool := range []string{"job_output", "job_kill"} {
		if text, isErr, _ := o.call(t, tool, map[string]any{"job_id": "bash-2"}); text != "Error: job bash-2 belongs to another session" || !isErr {
			t.Errorf("other principal's %s = %q isError=%v", tool, text, isErr)
		}
	}
	if got := o.text(t, "job_list", map[string]any{}); got != "(no background jobs)" {
		t.Errorf("other principal's job_list = %q", got)
	}
	if got := b.text(t, "job_kill", map[string]any{"job_id": "bash-2"}); got != "requested cancellation of job bash-2" {
		t.Errorf("owner's job_kill = %q", got)
	}
}

// TestStatelessEscalationUsesInputRequired: under the sandbox profile, an escalation on
// the stateless lane is asked through an input_required result; the Go client's handler
// answers it and the client retries: decline → the rejection, nothing runs; accept →
// the command runs once, in the wider mode.
func TestStatelessEscalationUsesInputRequired(t *testing.T) {
	for _, lane := range []string{"http", "stdio"} {
		t.Run(lane, func(t *testing.T) {
			ws := t.TempDir()
			var mu sync.Mutex
			answer := "decline"
			var asked []*mcp.ElicitParams
			o := statelessOptions{elicit: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, req.Params)
				return &mcp.ElicitResult{Action: answer}, nil
			}}
			args := []string{"--profile", "sandbox", "--sandbox-mode", "read-only", "--workspace", ws}
			var c *statelessClient
			if lane == "http" {
				srv := startHTTPServe(t, append(args, "--token-file", writeTokens(t, testToken))...)
				c = httpStateless(t, srv.url, testToken, o)
			} else {
				cmd := exec.Command(dshBin, append([]string{"serve"}, args...)...)
				c = connectStateless(t, &mcp.CommandTransport{Command: cmd}, o)
			}
			marker := filepath.Join(ws, "marker")
			escalate := map[string]any{"command": "touch marker", "description": "Create a marker file",
				"sandbox_permissions": "workspace-write", "justification": "The marker must be created in the workspace."}
			if text, isErr, _ := c.call(t, "bash", escalate); text != `Error: the user rejected escalating this command to "workspace-write"` || !isErr {
				t.Errorf("declined: %q isError=%v", text, isErr)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the declined command ran")
			}
			mu.Lock()
			answer = "accept"
			mu.Unlock()
			if text, isErr, _ := c.call(t, "bash", escalate); text != "(no output)" || isErr {
				t.Fatalf("accepted: %q isError=%v", text, isErr)
			}
			if _, err := os.Stat(marker); err != nil {
				t.Fatalf("the approved command did not run: %v", err)
			}
			if text := c.text(t, "bash", map[string]any{"command": "touch second", "description": "Create another file"}); !strings.Contains(text, "denied under read-only mode") {
				t.Errorf("the approval outlived its call: %q", text)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) != 2 {
				t.Fatalf("questions asked = %d, want 2", len(asked))
			}
			schema, _ := json.Marshal(asked[0].RequestedSchema)
			if string(schema) != `{"properties":{},"type":"object"}` {
				t.Errorf("schema %s", schema)
			}
			for _, part := range []string{"touch marker", "workspace-write", "The marker must be created in the workspace."} {
				if !strings.Contains(asked[0].Message, part) {
					t.Errorf("question lacks %q:\n%s", part, asked[0].Message)
				}
			}
		})
	}
}

// TestStatelessLaneOverStdio: a 2026-07-28 client on stdio discovers, calls, and gets the
// completion notice through its subscription — no log notifications, no server requests.
func TestStatelessLaneOverStdio(t *testing.T) {
	ws := t.TempDir()
	cmd := exec.Command(dshBin, "serve", "--workspace", ws)
	c := connectStateless(t, &mcp.CommandTransport{Command: cmd}, statelessOptions{})
	if text := c.text(t, "bash", map[string]any{"command": "pwd", "description": "Print the directory"}); text != ws+"\n" {
		t.Errorf("pwd = %q", text)
	}
	if err := c.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "dsh://notices"}); err != nil {
		t.Fatal(err)
	}
	if got := c.text(t, "bash", map[string]any{"command": "true", "description": "Do nothing", "run_in_background": true}); got != "started background job bash-1" {
		t.Fatalf("start: %q", got)
	}
	notice := "background job bash-1 (bash: true) finished [status: completed, exit code: 0]. Read its output with job_output."
	waitFor(t, 20*time.Second, "the completion notice", func() bool { return c.updates.has("dsh://notices|" + notice) })
}

// roundRobin is a load balancer in front of replicas: each request goes to the next one.
type roundRobin struct {
	targets []string // host:port
	n       atomic.Int64
	hits    []atomic.Int64
}

func (rr *roundRobin) RoundTrip(r *http.Request) (*http.Response, error) {
	i := int(rr.n.Add(1)) % len(rr.targets)
	rr.hits[i].Add(1)
	r = r.Clone(r.Context())
	r.URL.Host = rr.targets[i]
	r.Host = rr.targets[i]
	return bearer{token: testToken}.RoundTrip(r)
}

// TestStatelessReplicas: two `dsh serve --http` replicas with one token; a stateless
// client whose every request goes to the other replica still discovers, lists and calls,
// in one harness session id (derived from the token).
func TestStatelessReplicas(t *testing.T) {
	ws := t.TempDir()
	tokens := writeTokens(t, testToken)
	r1 := startHTTPServe(t, "--workspace", ws, "--token-file", tokens)
	r2 := startHTTPServe(t, "--workspace", ws, "--token-file", tokens)
	host := func(url string) string { return strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp") }
	lb := &roundRobin{targets: []string{host(r1.url), host(r2.url)}, hits: make([]atomic.Int64, 2)}
	c := connectStateless(t, &mcp.StreamableClientTransport{Endpoint: r1.url, HTTPClient: &http.Client{Transport: lb}}, statelessOptions{})
	ids := map[string]bool{}
	for i := range 6 {
		text, isErr, _ := c.call(t, "bash", map[string]any{"command": "echo $DSH_SESSION_ID", "description": "Show the session id"})
		if isErr || len(strings.TrimSpace(text)) != 16 {
			t.Fatalf("call %d: %q isError=%v", i, text, isErr)
		}
		ids[text] = true
	}
	if len(ids) != 1 {
		t.Errorf("session ids across replicas: %v", ids)
	}
	if lb.hits[0].Load() < 3 || lb.hits[1].Load() < 3 {
		t.Errorf("requests per replica: %d, %d", lb.hits[0].Load(), lb.hits[1].Load())
	}
}

// TestStatelessToolListChanged: a hot reload that changes the tools reaches a stateless
// client as tools/list_changed on its subscriptions/listen stream.
func TestStatelessToolListChanged(t *testing.T) {
	profile := filepath.Join(t.TempDir(), "profile.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(profile+".tmp", []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(profile+".tmp", profile); err != nil {
			t.Fatal(err)
		}
	}
	write("extends: default\n")
	srv := startHTTPServe(t, "--workspace", t.TempDir(), "--profile", profile, "--token-file", writeTokens(t, testToken))
	c := httpStateless(t, srv.url, testToken, statelessOptions{})
	write("extends: default\nplugins:\n  - id: jobs\n    disabled: true\n")
	waitFor(t, 20*time.Second, "tools/list_changed", func() bool { return c.changes.has("tools") })
	res, err := c.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 1 || res.Tools[0].Name != "bash" {
		t.Errorf("tools after the reload: %d", len(res.Tools))
	}
}

// TestStatelessPrincipalIdleTimeout: a principal with no request in flight (an open
// subscriptions/listen stream counts as one) for --session-timeout ends like a session:
// its background jobs are killed; a later request starts afresh.
func TestStatelessPrincipalIdleTimeout(t *testing.T) {
	ws := t.TempDir()
	srv := startHTTPServe(t, "--workspace", ws, "--session-timeout", "1s", "--token-file", writeTokens(t, testToken))
	c := httpStateless(t, srv.url, testToken, statelessOptions{noListen: true})
	if got := c.text(t, "bash", map[string]any{"command": "echo $$ > pid; exec sleep 300", "description": "Sleep", "run_in_background": true}); got != "started background job bash-1" {
		t.Fatalf("start: %q", got)
	}
	pid := readPidFile(t, filepath.Join(ws, "pid"))
	waitFor(t, 20*time.Second, "the idle principal's job to be killed", func() bool { return !alive(pid) })
	// The session's end deletes the job once its process is gone; a request that
	// arrives meanwhile may still list it as stopping.
	waitFor(t, 20*time.Second, "the ended session's job to be deleted", func() bool {
		return c.text(t, "job_list", map[string]any{}) == "(no background jobs)"
	})
}

// TestStatelessCancelByClosingTheStream: a stateless HTTP client cancels a call by
// abandoning its request; the command's tree is killed.
func TestStatelessCancelByClosingTheStream(t *testing.T) {
	ws := t.TempDir()
	srv := startHTTPServe(t, "--workspace", ws, "--token-file", writeTokens(t, testToken))
	c := httpStateless(t, srv.url, testToken, statelessOptions{noListen: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo $$ > pid; exec sleep 300", "description": "Sleep until cancelled"}})
		done <- err
	}()
	pid := readPidFile(t, filepath.Join(ws, "pid"))
	cancel()
	if err := <-done; err == nil {
		t.Error("the cancelled call returned no error")
	}
	waitFor(t, 10*time.Second, "the cancelled command to be killed", func() bool { return !alive(pid) })
}
