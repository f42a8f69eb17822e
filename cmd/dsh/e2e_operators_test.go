package main_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The job tools take the id as bash's structured result spells it (jobId) as well as
// job_id, and their schema says so.
func TestJobToolsAcceptBothIDSpellings(t *testing.T) {
	c := startServe(t, clientOptions{}, "--workspace", t.TempDir())
	_, _, value := c.call(t, "bash", map[string]any{"command": "echo from the job", "description": "Run a job", "run_in_background": true})
	v, _ := value.(map[string]any)
	id, _ := v["jobId"].(string)
	if id != "bash-1" {
		t.Fatalf("structured content = %v", value)
	}
	text, isErr, _ := c.call(t, "job_output", map[string]any{"jobId": id, "wait": true})
	if text != "from the job\n[status: completed, exit code: 0]" || isErr {
		t.Errorf("job_output {jobId} = %q (isError %v)", text, isErr)
	}
	text, isErr, _ = c.call(t, "job_kill", map[string]any{"job_id": id})
	if !strings.HasPrefix(text, "job bash-1 had already finished") || isErr {
		t.Errorf("job_kill {job_id} = %q (isError %v)", text, isErr)
	}
	text, isErr, _ = c.call(t, "job_output", map[string]any{})
	if text != `Error: missing required property "job_id"` || !isErr {
		t.Errorf("job_output {} = %q (isError %v)", text, isErr)
	}

	out, _, code := runDsh(t, t.TempDir(), "tools")
	if code != 0 || !strings.Contains(out, `"jobId": {`) || !strings.Contains(out, "jobId is accepted as the same argument") {
		t.Errorf("dsh tools does not declare jobId:\n%s", out)
	}
}

// An ssh address without a port means port 22, as for ssh(1): check accepts it.
func TestSSHAddressWithoutPort(t *testing.T) {
	ws := t.TempDir()
	p := filepath.Join(ws, "ssh.yaml")
	profile := "extends: default\nplugins:\n  - id: ssh\n    name: ssh\n    config: {address: 127.0.0.1}\n  - id: bash\n    name: bash-ssh\n"
	if err := os.WriteFile(p, []byte(profile), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runDsh(t, ws, "check", "--profile", p)
	if code != 0 || out != "profile "+p+": ok (9 rows)\n" {
		t.Errorf("check: exit %d, %q, %q", code, out, errOut)
	}
}

// A misspelled tool or profile name gets the name it is closest to, after the message
// it always had.
func TestTyposGetASuggestion(t *testing.T) {
	ws := t.TempDir()
	out, _, code := runDsh(t, ws, "call", "bsh", `{"command":"true","description":"d"}`)
	if out != `Error: unknown tool "bsh" (did you mean "bash"?)` || code != 1 {
		t.Errorf("call bsh: %q exit %d", out, code)
	}
	out, _, code = runDsh(t, ws, "call", "grep", `{}`)
	if out != `Error: unknown tool "grep"` || code != 1 {
		t.Errorf("call grep: %q exit %d", out, code)
	}
	_, errOut, code := runDsh(t, ws, "status", "--profile", "sandbx")
	if want := `dsh: start: profile "sandbx": not a built-in profile (default, minimal, sandbox) and no file of that name exists (did you mean "sandbox"?)` + "\n"; errOut != want || code != 1 {
		t.Errorf("status --profile sandbx: exit %d, %q", code, errOut)
	}
	p := filepath.Join(ws, "typo.yaml")
	os.WriteFile(p, []byte("extends: defualt\n"), 0o600)
	_, errOut, code = runDsh(t, ws, "check", "--profile", p)
	if !strings.HasSuffix(errOut, `nor an existing file (`+filepath.Join(ws, "defualt")+`) (did you mean "default"?)`+"\n") || code != 1 {
		t.Errorf("check extends: defualt: exit %d, %q", code, errOut)
	}
}

// A tool whose row cannot activate answers why, through dsh call and over MCP, instead
// of reading as a tool that does not exist; a name no row declares is unknown (over
// MCP, the protocol error an unknown tool gets), with the closest name suggested.
func TestUnavailableToolSaysWhy(t *testing.T) {
	ws := t.TempDir()
	p := filepath.Join(ws, "ssh.yaml")
	key := filepath.Join(ws, "no-such-key")
	profile := "extends: default\nplugins:\n  - id: ssh\n    name: ssh\n    config: {address: 127.0.0.1, identityFile: " + key + "}\n  - id: bash\n    name: bash-ssh\n"
	if err := os.WriteFile(p, []byte(profile), 0o600); err != nil {
		t.Fatal(err)
	}
	want := `Error: tool "bash" is unavailable: row tool-bash is pending (missing shell ← row bash is pending ` +
		`(missing ssh ← row ssh failed: ssh: identityFile: open ` + key + `: no such file or directory))`
	out, _, code := runDsh(t, ws, "call", "--profile", p, "bash", `{"command":"true","description":"d"}`)
	if out != want || code != 1 {
		t.Errorf("dsh call: exit %d\n%s\nwant\n%s", code, out, want)
	}

	c := startServe(t, clientOptions{}, "--profile", p, "--workspace", ws)
	if names := c.toolNames(t); strings.Contains(strings.Join(names, " "), "bash") {
		t.Errorf("tools/list serves %v", names)
	}
	text, isErr, _ := c.call(t, "bash", map[string]any{"command": "true", "description": "d"})
	if text != want || !isErr {
		t.Errorf("over MCP: %q (isError %v)\nwant %q", text, isErr, want)
	}
	_, err := c.CallTool(context.Background(), &mcp.CallToolParams{Name: "job_outptu", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), `unknown tool "job_outptu" (did you mean "job_output"?)`) {
		t.Errorf("a misspelled tool over MCP: %v", err)
	}
}

// dsh check refuses the writableRoots that would fail at start or at every call, and
// dsh status --workspace exits 1 when every confined call in that workspace would fail,
// saying why in the executor's row; the call's own error names writableRoots[0].
func TestCheckAndStatusCatchWhatConfinedCallsWouldMeet(t *testing.T) {
	ws := t.TempDir()
	tmp, err := filepath.EvalSymlinks(os.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string {
		p := filepath.Join(ws, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const tail = "; refusing to run confined commands (keep it out of the workspace and writableRoots, or move it: subprocess spillRoot, TMPDIR)"
	missing := write("missing.yaml", "extends: sandbox\nplugins:\n  - id: bash\n    config: {writableRoots: [/nonexistent]}\n")
	temp := write("temp.yaml", "extends: sandbox\nplugins:\n  - id: bash\n    config: {writableRoots: ["+tmp+"]}\n")
	for p, want := range map[string]string{
		missing: `dsh: ` + missing + `: row "bash": bash-sandbox: writableRoots[0]: lstat /nonexistent: no such file or directory` + "\n",
		temp:    `dsh: ` + temp + `: row "bash": bash-sandbox: the temp dir "` + tmp + `" holds the writable root "` + tmp + `" (writableRoots[0]), so it cannot be hidden from confined commands` + tail + "\n",
	} {
		if out, errOut, code := runDsh(t, ws, "check", "--profile", p); code != 1 || out != "" || errOut != want {
			t.Errorf("check %s: exit %d, %q, stderr:\n%s\nwant\n%s", p, code, out, errOut, want)
		}
	}

	// A writable root that holds the spill root: every confined call is refused.
	spill := t.TempDir()
	exposing := write("exposing.yaml", "extends: sandbox\nplugins:\n  - id: subprocess\n    config: {spillRoot: "+spill+"}\n  - id: bash\n    config: {writableRoots: ["+spill+"]}\n")
	refusal := `bash-sandbox: the spill root "` + spill + `" holds the writable root "` + spill + `" (writableRoots[0]), so it cannot be hidden from confined commands` + tail
	if out, _, code := runDsh(t, ws, "call", "--profile", exposing, "bash", `{"command":"true","description":"d"}`); out != "Error: "+refusal || code != 1 {
		t.Errorf("call: exit %d, %q", code, out)
	}
	for _, c := range []struct {
		profile, workspace, why string
	}{
		{exposing, ws, refusal},
		{"sandbox", tmp, `"` + tmp + `" holds the writable root "` + tmp + `", so it cannot be hidden from confined commands` + tail},
		{"sandbox", ws, ""},
	} {
		out, _, code := runDsh(t, ws, "status", "--profile", c.profile, "--workspace", c.workspace, "--json")
		var st struct{ Rows []struct{ ID, Detail string } }
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		var detail string
		for _, r := range st.Rows {
			if r.ID == "bash" {
				detail = r.Detail
			}
		}
		note := "; every confined call in " + c.workspace + " fails: "
		switch {
		case c.why == "" && (code != 0 || strings.Contains(detail, note)):
			t.Errorf("status --profile %s --workspace %s: exit %d, bash row detail %q", c.profile, c.workspace, code, detail)
		case c.why != "" && (code != 1 || !strings.Contains(detail, note) || !strings.HasSuffix(detail, c.why)):
			t.Errorf("status --profile %s --workspace %s: exit %d, bash row detail %q; want exit 1 and %q", c.profile, c.workspace, code, detail, note+"…"+c.why)
		}
	}
}
