package main_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/internal/proctest"
)

// dshBin is the dsh binary built once for these end-to-end tests.
var dshBin string

// The MCP revisions of the two lanes: the newest session-based one, and the stateless one.
const (
	sessionRevision   = "2025-11-25"
	statelessRevision = "2026-07-28"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dsh-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dshBin = filepath.Join(dir, "dsh")
	// -buildvcs=true: stamp the checkout's revision even where GOFLAGS turns it off (a
	// git worktree still gets none: Go does not read its .git file).
	build := exec.Command("go", "build", "-buildvcs=true", "-o", dshBin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building dsh:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid is a live (non-zombie) process.
func alive(pid int) bool { return !proctest.Gone(pid) }

// runDsh runs the binary and returns stdout, stderr and the exit code.
func runDsh(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(dshBin, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("dsh %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// client is an MCP client connected to `dsh serve` over stdio, recording what the
// server pushes.
type client struct {
	*mcp.ClientSession
	cmd     *exec.Cmd
	stderr  *syncBuffer
	logs    *recorder
	changes *recorder
}

type clientOptions struct {
	elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)
	wrap   []string // runs dsh under this command line (setpriv …)
	env    []string // added to the server's environment
}

func startServe(t *testing.T, o clientOptions, args ...string) *client {
	t.Helper()
	c := &client{stderr: &syncBuffer{}, logs: &recorder{}, changes: &recorder{}}
	argv := append(append(append([]string(nil), o.wrap...), dshBin, "serve"), args...)
	c.cmd = exec.Command(argv[0], argv[1:]...)
	c.cmd.Stderr = c.stderr
	if len(o.env) > 0 {
		c.cmd.Env = append(os.Environ(), o.env...)
	}
	opts := &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			c.logs.add(fmt.Sprintf("%s|%s|%v", r.Params.Level, r.Params.Logger, r.Params.Data))
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { c.changes.add("tools") },
		ElicitationHandler:     o.elicit,
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// These tests are about the session lane: pin its newest revision (the SDK would
	// otherwise negotiate the stateless one, which e2e_stateless_test.go covers).
	cs, err := cl.Connect(ctx, &mcp.CommandTransport{Command: c.cmd}, &mcp.ClientSessionOptions{ProtocolVersion: sessionRevision})
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, c.stderr.String())
	}
	c.ClientSession = cs
	t.Cleanup(func() {
		cs.Close()
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Wait()
		}
	})
	return c
}

// call runs a tool and returns its text, isError and structured content.
func (c *client) call(t *testing.T, name string, args map[string]any) (string, bool, any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s %v: %v\nstderr:\n%s", name, args, err, c.stderr.String())
	}
	var text strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return text.String(), res.IsError, res.StructuredContent
}

func (c *client) toolNames(t *testing.T) []string {
	t.Helper()
	res, err := c.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func atoiOrFail(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

// readPidFile waits for a command to write its pid (a full line) to path.
var readPidFile = proctest.WaitPidFile

// wantExitZero waits up to d for cmd (started) to exit and wants status 0; stderr, when
// not nil, is shown on failure.
func wantExitZero(t *testing.T, cmd *exec.Cmd, stderr fmt.Stringer, d time.Duration) {
	t.Helper()
	shown := ""
	if stderr != nil {
		shown = "\nstderr:\n" + stderr.String()
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("dsh exited with %v, want 0%s", err, shown)
		}
	case <-time.After(d):
		t.Fatalf("dsh did not exit within %v%s", d, shown)
	}
}
