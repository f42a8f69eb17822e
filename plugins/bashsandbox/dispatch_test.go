package bashsandbox_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	bashsandbox "github.com/dsh-dev/dsh/plugins/bashsandbox"
)

// ran is how one process ended.
type ran struct {
	code   *int // nil after a signal
	signal string
	stdout string
	stderr string
}

func (r ran) String() string {
	code := "signal " + r.signal
	if r.code != nil {
		code = "exit " + strconv.Itoa(*r.code)
	}
	return fmt.Sprintf("%s, stdout %q, stderr %q", code, r.stdout, r.stderr)
}

func (r ran) exit() int {
	if r.code == nil {
		return -1
	}
	return *r.code
}

// testEnv is a plain environment: English messages, a real PATH and HOME.
func testEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LC_ALL=C"}
}

// runArgv runs argv to completion in dir.
func runArgv(t *testing.T, dir string, argv ...string) ran {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = testEnv()
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := ran{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run %q: %v", argv, err)
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		r.signal = ws.Signal().String()
	} else {
		c := ws.ExitStatus()
		r.code = &c
	}
	return r
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// tcpListener accepts connections on the host's 127.0.0.1 and counts them.
func tcpListener(t *testing.T) (port string, accepted func() int) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// The box starts before the rest of the binary is initialised — only the
// packages the runtime's own start-up needs run first (Go initialises packages in
// import-path order as their imports become ready, and the sandbox's package imports
// nothing else). This test binary links the whole bash-sandbox stack (container, fx,
// koanf, YAML, crypto via net/http…), like dsh does. Started without its control
// socket, the box fails at once with the launcher-failure line.
func TestBoxDispatchedEarly(t *testing.T) {
	cmd := exec.Command(os.Args[0], bashsandbox.BoxArg)
	cmd.Env = append(testEnv(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != bashsandbox.LauncherFailureExitCode {
		t.Fatalf("sandbox without a control socket: %v; stderr %q", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "dsh-sandbox: control socket: ") && !strings.HasPrefix(last, "dsh-sandbox: read the setup: ") {
		t.Fatalf("last line %q", last)
	}
	var before []string
	for _, l := range lines[:len(lines)-1] {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "init" {
			t.Fatalf("unexpected stderr line %q", l)
		}
		before = append(before, f[1])
	}
	for _, pkg := range before {
		for _, heavy := range []string{"github.com/", "golang.org/", "go.uber.org/fx", "go.uber.org/zap/zapcore", "go.yaml.in/",
			"encoding/json", "encoding/gob", "crypto/internal/fips140/", "net", "regexp", "text/template"} {
			if strings.HasPrefix(pkg, heavy) {
				t.Errorf("%s was initialised before the sandbox ran", pkg)
			}
		}
	}
	if len(before) > 30 {
		t.Errorf("%d packages initialised before the sandbox ran: %q", len(before), before)
	}
	t.Logf("initialised before the sandbox: %q", before)
}

// Running confined commands leaves this process unrestricted (the confinement is the
// box's, per command thread), and this process is not dumpable (MaybeRunLauncher).
func TestHarnessNeverConfined(t *testing.T) {
	st := newStack(t, stackSetup{})
	ws := workspace(t)
	res := st.bash(t, session("harness", ws), `grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\t ' ' '`)
	want := "NoNewPrivs: 1\nSeccomp: 0\n"
	if bashsandbox.SeccompSupported {
		want = "NoNewPrivs: 1\nSeccomp: 2\n"
	}
	expect(t, res, want, false)
	own, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(own), "NoNewPrivs:\t0\n") || !strings.Contains(string(own), "Seccomp:\t0\n") {
		t.Fatalf("the harness process itself got restricted:\n%s", own)
	}
	if d, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_GET_DUMPABLE, 0, 0); e != 0 || d != 0 {
		t.Fatalf("the harness is dumpable (%d, %v)", d, e)
	}
	f := outsideTempDir(t, "dsh-sandbox-harness-") + "/harness-can-write"
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatalf("the harness process cannot write: %v", err)
	}
}
