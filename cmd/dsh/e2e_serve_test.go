package main_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestServeStdioInitializeToolsAndCalls(t *testing.T) {
	ws := t.TempDir()
	c := startServe(t, clientOptions{}, "--workspace", ws)

	wantPrompt, _, code := runDsh(t, ws, "prompt", "--workspace", ws)
	if code != 0 {
		t.Fatalf("dsh prompt exit %d", code)
	}
	if got := c.InitializeResult().Instructions; got+"\n" != wantPrompt {
		t.Errorf("instructions:\n%q\nwant (dsh prompt):\n%q", got, wantPrompt)
	}
	if got, want := c.toolNames(t), []string{"bash", "job_kill", "job_list", "job_output", "job_write"}; !slices.Equal(got, want) {
		t.Errorf("tools = %v, want %v", got, want)
	}
	toolsOut, _, code := runDsh(t, ws, "tools")
	if code != 0 {
		t.Fatalf("dsh tools exit %d", code)
	}
	checkListedDefinitions(t, c, toolsOut)

	text, isErr, value := c.call(t, "bash", map[string]any{"command": "echo hello", "description": "Say hello"})
	if text != "hello\n" || isErr {
		t.Errorf("echo hello: %q isError=%v", text, isErr)
	}
	v, _ := value.(map[string]any)
	if v["kind"] != "foreground" || v["exitCode"] != float64(0) || v["signal"] != nil {
		t.Errorf("structured content = %v", value)
	}

	text, isErr, _ = c.call(t, "bash", map[string]any{"command": "echo failing; exit 3", "description": "Fail on purpose"})
	if text != "failing\n[exit code: 3]" || isErr {
		t.Errorf("exit 3: %q isError=%v", text, isErr)
	}
	text, isErr, _ = c.call(t, "bash", map[string]any{"command": "pwd", "description": "Print the directory"})
	if text != ws+"\n" || isErr {
		t.Errorf("pwd = %q, want the workspace %q", text, ws)
	}
	text, isErr, _ = c.call(t, "bash", map[string]any{"description": "No command"})
	if text != `Error: missing required property "command"` || !isErr {
		t.Errorf("missing command: %q isError=%v", text, isErr)
	}
}

func TestServeStdioJobNoticeAndStatusResource(t *testing.T) {
	ws := t.TempDir()
	c := startServe(t, clientOptions{}, "--workspace", ws)
	text, isErr, value := c.call(t, "bash", map[string]any{"command": "echo started; echo done", "description": "Run a short job", "run_in_background": true})
	if text != "started background job bash-1" || isErr {
		t.Fatalf("background start: %q isError=%v", text, isErr)
	}
	if v, _ := value.(map[string]any); v["kind"] != "background" || v["jobId"] != "bash-1" {
		t.Errorf("structured content = %v", value)
	}
	want := "info|dsh.jobs|background job bash-1 (bash: echo started; echo done) finished [status: completed, exit code: 0]. Read its output with job_output."
	waitFor(t, 20*time.Second, "the completion notice", func() bool { return c.logs.has(want) })

	text, _, _ = c.call(t, "job_output", map[string]any{"job_id": "bash-1"})
	if text != "started\ndone\n[status: completed, exit code: 0]" {
		t.Errorf("job_output = %q", text)
	}

	res, err := c.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "dsh://status"})
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Profile string `json:"profile"`
		Rows    []struct {
			ID, Plugin, State string
			Missing           []string
		} `json:"rows"`
		LastReloadError string `json:"lastReloadError"`
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &st); err != nil {
		t.Fatal(err)
	}
	if st.Profile != "default" || len(st.Rows) != 8 {
		t.Fatalf("status = %+v", st)
	}
	for _, r := range st.Rows {
		if r.State != "active" {
			t.Errorf("row %s is %s", r.ID, r.State)
		}
	}
}

func TestServeHotReloadKeepsJobAndAnnouncesTools(t *testing.T) {
	ws := t.TempDir()
	dir := t.TempDir()
	profile := filepath.Join(dir, "profile.yaml")
	write := func(s string) {
		t.Helper()
		tmp := profile + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, profile); /* an editor's save */ err != nil {
			t.Fatal(err)
		}
	}
	write("extends: default\n")
	c := startServe(t, clientOptions{}, "--workspace", ws, "--profile", profile)

	text, _, _ := c.call(t, "bash", map[string]any{"command": "for i in 1 2 3 4 5 6 7 8 9 10; do echo line$i; sleep 0.3; done", "description": "Emit ten lines slowly", "run_in_background": true})
	if text != "started background job bash-1" {
		t.Fatalf("start: %q", text)
	}

	// 1. A new timeout for the executor: new calls time out accordingly.
	write("extends: default\nplugins:\n  - id: bash\n    config:\n      timeoutMs: 300\n")
	waitFor(t, 20*time.Second, "the new timeout", func() bool {
		text, _, _ := c.call(t, "bash", map[string]any{"command": "sleep 5", "description": "Sleep past the timeout"})
		return text == "(no output)\n[timed out after 300ms]\n[killed by signal: SIGTERM]"
	})

	// 2. Tool set change: disable background jobs → list_changed, job tools gone.
	before := len(c.changes.all())
	write("extends: default\nplugins:\n  - id: tool-bash\n    config:\n      enableRunInBackground: false\n")
	waitFor(t, 20*time.Second, "tools/list_changed", func() bool { return len(c.changes.all()) > before })
	waitFor(t, 20*time.Second, "run_in_background to leave the schema", func() bool {
		res, err := c.ListTools(context.Background(), nil)
		if err != nil {
			return false
		}
		for _, tl := range res.Tools {
			if tl.Name == "bash" {
				b, _ := json.Marshal(tl.InputSchema)
				return !strings.Contains(string(b), "run_in_background")
			}
		}
		return false
	})

	// 3. Swap the executor: the bash tool now offers sandbox escalation and confines.
	write("extends: default\nplugins:\n  - id: bash\n    name: bash-sandbox\n")
	waitFor(t, 20*time.Second, "sandbox_permissions in the schema", func() bool {
		res, err := c.ListTools(context.Background(), nil)
		if err != nil {
			return false
		}
		for _, tl := range res.Tools {
			if tl.Name == "bash" {
				b, _ := json.Marshal(tl.InputSchema)
				return strings.Contains(string(b), "sandbox_permissions")
			}
		}
		return false
	})
	if text, _, _ := c.call(t, "bash", map[string]any{"command": "touch x", "description": "Write in read-only mode"}); !strings.Contains(text, "[sandbox: file access denied under read-only mode]") {
		t.Errorf("after the swap, a write is not confined: %q", text)
	}

	// 4. Invalid YAML: the error is reported, everything keeps working.
	write("plugins: [\n")
	waitFor(t, 20*time.Second, "the reload error in dsh://status", func() bool {
		res, err := c.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "dsh://status"})
		return err == nil && strings.Contains(res.Contents[0].Text, `"lastReloadError": "`) && !strings.Contains(res.Contents[0].Text, `"lastReloadError": ""`)
	})
	if text, _, _ := c.call(t, "bash", map[string]any{"command": "echo still", "description": "Check it still works"}); text != "still\n" {
		t.Errorf("after a bad edit: %q", text)
	}

	// The job survived every edit, with its whole output.
	waitFor(t, 30*time.Second, "the job to finish", func() bool {
		text, _, _ := c.call(t, "job_list", map[string]any{})
		return strings.Contains(text, "bash-1 [bash] completed")
	})
	var all strings.Builder
	text, _, _ = c.call(t, "job_output", map[string]any{"job_id": "bash-1"})
	all.WriteString(text)
	for i := 1; i <= 10; i++ {
		if !strings.Contains(all.String(), "line"+strconv.Itoa(i)+"\n") {
			t.Errorf("job output lacks line%d: %q", i, all.String())
		}
	}
}

// checkListedDefinitions: the tools/list of c shows each tool's own description and
// schemas, those `dsh tools` prints (toolsOut), not what the SDK's server was given to
// check.
func checkListedDefinitions(t *testing.T, c *client, toolsOut string) {
	t.Helper()
	var want []struct {
		Name         string          `json:"name"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
	}
	if err := json.Unmarshal([]byte(toolsOut), &want); err != nil || len(want) == 0 {
		t.Fatalf("dsh tools: %v\n%s", err, toolsOut)
	}
	res, err := c.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	canon := func(v any) string {
		b, _ := json.Marshal(v)
		var m any
		_ = json.Unmarshal(b, &m)
		b, _ = json.Marshal(m)
		return string(b)
	}
	listed := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		listed[tl.Name] = tl
	}
	for _, w := range want {
		got := listed[w.Name]
		if got == nil {
			t.Errorf("%s not listed", w.Name)
			continue
		}
		if got.Description != w.Description || canon(got.InputSchema) != canon(w.InputSchema) || canon(got.OutputSchema) != canon(w.OutputSchema) {
			t.Errorf("%s listed as %q\n%s\n%s\nwant %q\n%s\n%s", w.Name, got.Description, canon(got.InputSchema), canon(got.OutputSchema),
				w.Description, canon(w.InputSchema), canon(w.OutputSchema))
		}
	}
}
