package mcpserve_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/fx"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/container/profile"
	"github.com/dsh-dev/dsh/mcpserve"
	bashlocal "github.com/dsh-dev/dsh/plugins/bashlocal"
	"github.com/dsh-dev/dsh/plugins/prompt"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/profiles"
)

// compose starts the built-in minimal profile in this process, as an embedder would,
// and stops it when the test ends.
func compose(t *testing.T, log *slog.Logger) *container.Runtime {
	t.Helper()
	var rt *container.Runtime
	app := fx.New(
		profile.Module,
		tools.Module, prompt.Module, subprocess.Module, shellenv.Module, bashlocal.Module, toolbash.Module,
		fx.Supply(profile.ModuleOptions{Profile: "minimal", Builtins: profiles.FS, Logger: log}),
		fx.Populate(&rt),
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = app.Stop(context.Background()) })
	return rt
}

// An embedder serves its own runtime over stdio with the harness sessions it makes:
// the call runs in the session's workspace, under the session's id.
func TestEmbeddedServerOverStdio(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rt := compose(t, log)
	ws := t.TempDir()
	srv := mcpserve.New(rt, "v-test", log, mcpserve.Options{
		NewSession: func() *container.Session { return &container.Session{ID: "embedded", Cwd: ws} },
	})
	defer srv.Close()

	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.ServeStdio(ctx, inR, outW) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
		for _, f := range []*os.File{inR, inW, outR, outW} {
			f.Close()
		}
	}()

	client := mcp.NewClient(&mcp.Implementation{Name: "embed-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ServerInfo.Version; v != "v-test" {
		t.Errorf("serverInfo.version %q, want v-test", v)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
		"command": "echo $DSH_SESSION_ID; pwd", "description": "Show the session",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; text != "embedded\n"+ws+"\n" || res.IsError {
		t.Errorf("result %q (isError %v), want the session id and the workspace", text, res.IsError)
	}
}

// fakeListener is a listener on an address Serve must refuse or accept without ever
// accepting a connection.
type fakeListener struct {
	addr   net.Addr
	closed bool
}

func (l *fakeListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (l *fakeListener) Close() error              { l.closed = true; return nil }
func (l *fakeListener) Addr() net.Addr            { return l.addr }

// Serve refuses to start without a token, or on a non-loopback address unless
// AllowRemote, and closes the listener it refused.
func TestServeRefuses(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	catalog, err := container.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	rt := container.NewRuntime(catalog, container.Options{Logger: log})
	defer rt.Close()
	newSession := func() *container.Session { return &container.Session{ID: "s"} }
	loopback := &net.TCPAddr{IP: net.IPv6loopback, Port: 1}
	remote := &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 1}
	for _, tc := range []struct {
		name string
		http mcpserve.HTTPOptions
		addr net.Addr
		want string
	}{
		{"no token", mcpserve.HTTPOptions{}, loopback, "no bearer token"},
		{"non-loopback", mcpserve.HTTPOptions{Tokens: []string{"t"}}, remote, "refusing to serve on non-loopback address 10.1.2.3:1"},
	} {
		srv := mcpserve.New(rt, "v", log, mcpserve.Options{NewSession: newSession, HTTP: tc.http})
		ln := &fakeListener{addr: tc.addr}
		err := srv.Serve(context.Background(), ln)
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), tc.want) || !ln.closed {
			t.Errorf("%s: %v (listener closed: %v), want %q", tc.name, err, ln.closed, tc.want)
		}
	}
}
