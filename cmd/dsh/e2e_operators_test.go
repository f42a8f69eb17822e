package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/internal/proctest"
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
	// On a terminal, the error result too ends with a newline (piped, the bytes are exact).
	if script, err := exec.LookPath("script"); err == nil {
		term := exec.Command(script, "-qec", proctest.Quote(dshBin)+" call bsh '{}'", "/dev/null")
		term.Dir = ws
		if out, _ := term.Output(); string(out) != `Error: unknown tool "bsh" (did you mean "bash"?)`+"\r\n" {
			t.Errorf("call bsh on a terminal: %q", out)
		}
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

// The generated bearer token survives restarts, is shared by a second `dsh serve
// --http`, and is never touched by a start that fails: the address is bound, and the
// HTTP flags checked, before anything is composed or written.
func TestHTTPTokenIsStable(t *testing.T) {
	home := t.TempDir()
	tokenPath := filepath.Join(home, "serve-token")
	serve := func(args ...string) *exec.Cmd {
		cmd := exec.Command(dshBin, append([]string{"serve", "--workspace", t.TempDir()}, args...)...)
		cmd.Env = append(os.Environ(), "DSH_HOME="+home)
		return cmd
	}
	started := func(args ...string) (*httpServe, string) {
		t.Helper()
		s := startHTTPServeCmd(t, serve(append([]string{"--http", "127.0.0.1:0"}, args...)...))
		data, err := os.ReadFile(tokenPath)
		if err != nil {
			t.Fatal(err)
		}
		return s, strings.TrimSpace(string(data))
	}
	first, token := started()
	if !strings.Contains(first.stderr.String(), "dsh: generated a bearer token in "+tokenPath) {
		t.Errorf("first start: %s", first.stderr.String())
	}
	second, again := started()
	if again != token || !strings.Contains(second.stderr.String(), "dsh: using the bearer token in "+tokenPath) {
		t.Errorf("a second serve replaced the token (%q → %q): %s", token, again, second.stderr.String())
	}
	for _, s := range []*httpServe{first, second} {
		if text := httpStateless(t, s.url, token, statelessOptions{}).text(t, "bash", map[string]any{"command": "echo ok", "description": "d"}); text != "ok\n" {
			t.Errorf("%s with the shared token: %q", s.url, text)
		}
	}
	first.cmd.Process.Kill()
	first.cmd.Wait()
	third, again := started()
	if again != token {
		t.Errorf("a restart replaced the token")
	}
	third.cmd.Process.Kill()
	third.cmd.Wait()

	// A port in use fails at once: the token file is untouched and nothing composed.
	before, _ := os.Stat(tokenPath)
	addr := strings.TrimSuffix(strings.TrimPrefix(second.url, "http://"), "/mcp")
	var stderr strings.Builder
	busy := serve("--http", addr, "--log-level", "info")
	busy.Stderr = &stderr
	err := busy.Run()
	after, _ := os.Stat(tokenPath)
	data, _ := os.ReadFile(tokenPath)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "address already in use") ||
		strings.Contains(stderr.String(), "process isolation") || strings.TrimSpace(string(data)) != token || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("port in use: %v, stderr:\n%s\ntoken file %q (was %q)", err, stderr.String(), data, token)
	}

	// HTTP-only flags need --http; a token file that cannot be read fails before composing.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-sessions", "3"}, "dsh: --max-sessions applies to serving over HTTP: use it with --http ADDR\nRun 'dsh --help' for usage.\n"},
		{[]string{"--session-timeout", "1m"}, "dsh: --session-timeout applies to serving over HTTP: use it with --http ADDR\nRun 'dsh --help' for usage.\n"},
		{[]string{"--token-file", filepath.Join(home, "none")}, "dsh: --token-file applies to serving over HTTP: use it with --http ADDR\nRun 'dsh --help' for usage.\n"},
		{[]string{"--http", "127.0.0.1:0", "--token-file", filepath.Join(home, "none"), "--log-level", "info"},
			"dsh: --token-file: open " + filepath.Join(home, "none") + ": no such file or directory\nRun 'dsh --help' for usage.\n"},
	} {
		_, errOut, code := runDsh(t, t.TempDir(), append([]string{"serve"}, c.args...)...)
		if code != 2 || errOut != c.want {
			t.Errorf("serve %q: exit %d, stderr:\n%s\nwant\n%s", c.args, code, errOut, c.want)
		}
	}
	// The usage line shows every flag.
	out, _, _ := runDsh(t, t.TempDir(), "serve", "--help")
	for _, flag := range []string{"--profile", "--workspace", "--sandbox-mode", "--log-level", "--http", "--token-file", "--allow-remote", "--max-sessions", "--session-timeout"} {
		if usage, _, _ := strings.Cut(strings.SplitN(out, "Usage:\n", 2)[1], "\n\n"); !strings.Contains(usage, flag) {
			t.Errorf("the usage line lacks %s:\n%s", flag, usage)
		}
	}
}

// dsh call with run_in_background prints the result exactly, then waits for the job —
// which would otherwise die with the call's session — and prints on stderr what
// job_output reads of it; Ctrl-C ends the wait, kills the job and fails the command.
func TestCallWaitsForItsBackgroundJob(t *testing.T) {
	ws := t.TempDir()
	args := `{"command":"sleep 0.3; echo done > marker; echo out; echo err >&2; exit 3","description":"Run a job","run_in_background":true}`
	out, errOut, code := runDsh(t, ws, "call", "bash", args)
	if out != "started background job bash-1" || code != 0 {
		t.Errorf("stdout %q exit %d", out, code)
	}
	want := "dsh: waiting for background job bash-1 to finish: a job ends with its session, which is this call's (Ctrl-C kills it)\n" +
		"dsh: background job bash-1 finished; job_output reads:\nout\n[stderr]\nerr\n[status: completed, exit code: 3]\n"
	if errOut != want {
		t.Errorf("stderr:\n%s\nwant\n%s", errOut, want)
	}
	if data, err := os.ReadFile(filepath.Join(ws, "marker")); err != nil || string(data) != "done\n" {
		t.Errorf("the job did not run to its end: %q, %v", data, err)
	}

	cmd := exec.Command(dshBin, "call", "bash", `{"command":"echo $$ > pid; exec sleep 60","description":"Sleep","run_in_background":true}`)
	cmd.Dir = ws
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := readPidFile(t, filepath.Join(ws, "pid"))
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.HasSuffix(stderr.String(), "dsh: interrupted: background job bash-1 is killed with the call's session\n") {
		t.Errorf("interrupted: %v, stderr:\n%s", err, stderr.String())
	}
	waitFor(t, 10*time.Second, "the job's process to be gone", func() bool { return !alive(pid) })
}

// The spill files dsh call keeps in $DSH_HOME/spill are pruned by size too: beyond
// 1 GiB in all, the oldest go first; the call's own stay, and so does every file not
// named as dsh names them.
func TestCallPrunesKeptSpillFilesBySize(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, "spill")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	now := time.Now()
	files := []struct {
		name string
		size int64
		age  time.Duration
	}{
		{"20260101T000000-00000000000000a1-1.log", 400 * mib, 3 * time.Hour}, // oldest: goes
		{"20260101T000001-00000000000000a2-1.log", 400 * mib, 2 * time.Hour}, // goes too: 1200 MiB + the new file > 1 GiB
		{"20260101T000002-00000000000000a3-1.log", 400 * mib, time.Hour},
		{"20260101T000003-00000000000000a4-1.log", 400 * mib, time.Minute},
		{"not-a-kept-file", 2048 * mib, 4 * time.Hour},
	}
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		// Sparse: the size without the disk space.
		if err := os.WriteFile(p, nil, 0o600); err != nil || os.Truncate(p, f.size) != nil || os.Chtimes(p, now.Add(-f.age), now.Add(-f.age)) != nil {
			t.Fatal("preparing", p, err)
		}
	}
	cmd := exec.Command(dshBin, "call", "--workspace", t.TempDir(), "bash", `{"command":"seq 1 30000","description":"Spill"}`)
	cmd.Env = append(os.Environ(), "DSH_HOME="+home)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dsh call: %v\n%s", err, out)
	}
	spill := spillOf(t, string(out))
	if _, err := os.Stat(spill); err != nil || filepath.Dir(spill) != dir {
		t.Fatalf("the call's spill file %s: %v", spill, err)
	}
	for i, f := range files {
		_, err := os.Stat(filepath.Join(dir, f.name))
		if gone := err != nil; gone != (i < 2) {
			t.Errorf("%s: gone %v", f.name, gone)
		}
	}
}

// An operator sees a reload: the log names the rows it mounted, restarted and
// disposed, and dsh://status has the last reload's time and result.
func TestReloadIsVisible(t *testing.T) {
	ws, dir := t.TempDir(), t.TempDir()
	profile := filepath.Join(dir, "profile.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(profile+".tmp", []byte(s), 0o644); err != nil || os.Rename(profile+".tmp", profile) != nil {
			t.Fatal(err)
		}
	}
	write("extends: default\nplugins:\n  - id: jobs\n    disabled: true\n")
	c := startServe(t, clientOptions{}, "--workspace", ws, "--profile", profile)
	status := func() map[string]any {
		res, err := c.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "dsh://status"})
		if err != nil {
			t.Fatal(err)
		}
		var st map[string]any
		if err := json.Unmarshal([]byte(res.Contents[0].Text), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := status(); st["lastReload"] != nil {
		t.Errorf("lastReload before any: %v", st["lastReload"])
	}
	edited := time.Now()
	write("extends: default\nplugins:\n  - id: bash\n    config: {timeoutMs: 5000}\n  - id: approval\n    disabled: true\n")
	line := `msg="profile reloaded" profile=` + profile + ` files=1 mounted=jobs restarted=bash,tool-bash disposed=approval`
	if !proctest.Until(20*time.Second, func() bool { return strings.Contains(c.stderr.String(), line) }) {
		t.Fatalf("no log line %s in:\n%s", line, c.stderr.String())
	}
	rl, _ := status()["lastReload"].(map[string]any)
	at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(rl["at"]))
	if rl["result"] != "applied" || at.Before(edited.Add(-time.Second)) || at.After(time.Now()) || fmt.Sprint(rl["restarted"]) != "[bash tool-bash]" ||
		fmt.Sprint(rl["mounted"]) != "[jobs]" || fmt.Sprint(rl["disposed"]) != "[approval]" || rl["error"] != "" {
		t.Errorf("lastReload %v", rl)
	}
	write("plugins: [\n")
	waitFor(t, 20*time.Second, "the failed reload in dsh://status", func() bool {
		rl, _ := status()["lastReload"].(map[string]any)
		return rl["result"] == "failed" && strings.Contains(fmt.Sprint(rl["error"]), profile)
	})
}
