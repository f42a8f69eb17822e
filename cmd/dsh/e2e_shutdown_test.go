package main_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"
)

// rawServe starts `dsh serve` with pipes and speaks just enough JSON-RPC to start a
// background job that prints its pid.
type rawServe struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	all   *recorder // every line dsh wrote
}

func startRaw(t *testing.T, ws string) *rawServe {
	t.Helper()
	cmd := exec.Command(dshBin, "serve", "--workspace", ws)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &rawServe{cmd: cmd, in: in, lines: make(chan string, 100), all: &recorder{}}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			r.all.add(sc.Text())
			r.lines <- sc.Text()
		}
		close(r.lines)
	}()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return r
}

func (r *rawServe) send(t *testing.T, msg string) {
	t.Helper()
	if _, err := io.WriteString(r.in, msg+"\n"); err != nil {
		t.Fatal(err)
	}
}

// await returns the first line matching re.
func (r *rawServe) await(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				t.Fatal("server closed stdout")
			}
			if re.MatchString(l) {
				return l
			}
		case <-timeout:
			t.Fatalf("no line matching %s", re)
		}
	}
}

// next returns the next line dsh writes.
func (r *rawServe) next(t *testing.T) string {
	t.Helper()
	return r.await(t, regexp.MustCompile(``))
}

// initialize performs the MCP handshake.
func (r *rawServe) initialize(t *testing.T) {
	t.Helper()
	r.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	r.await(t, regexp.MustCompile(`"id":1`))
	r.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// waitExit waits for dsh to exit and wants exit status 0.
func (r *rawServe) waitExit(t *testing.T) {
	t.Helper()
	wantExitZero(t, r.cmd, nil, 30*time.Second)
}

// startJob initializes and starts `echo $$; exec sleep 300`-style background work and
// returns the pids the job reports.
func (r *rawServe) startJob(t *testing.T) []int {
	t.Helper()
	r.initialize(t)
	args := map[string]any{"name": "bash", "arguments": map[string]any{
		"command":           `sleep 300 & echo $!; trap "" TERM; echo $$; sleep 300`,
		"description":       "Start processes that must not outlive dsh",
		"run_in_background": true,
	}}
	b, _ := json.Marshal(args)
	r.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":`+string(b)+`}`)
	r.await(t, regexp.MustCompile(`started background job bash-1`))
	var pids []int
	waitFor(t, 20*time.Second, "the job's pids", func() bool {
		r.send(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"job_output","arguments":{"job_id":"bash-1"}}}`)
		line := r.await(t, regexp.MustCompile(`"id":3`))
		for _, m := range regexp.MustCompile(`(?:^|\\n|")(\d+)\\n`).FindAllStringSubmatch(line, -1) {
			pids = append(pids, atoiOrFail(t, m[1]))
		}
		return len(pids) >= 2
	})
	for _, p := range pids {
		if !alive(p) {
			t.Fatalf("pid %d not alive before shutdown", p)
		}
	}
	return pids
}

func TestShutdownLeavesNoProcess(t *testing.T) {
	for _, how := range []string{"EOF", "SIGTERM", "SIGINT"} {
		t.Run(how, func(t *testing.T) {
			r := startRaw(t, t.TempDir())
			pids := r.startJob(t)
			switch how {
			case "EOF":
				r.in.Close()
			case "SIGTERM":
				r.cmd.Process.Signal(syscall.SIGTERM)
			case "SIGINT":
				r.cmd.Process.Signal(syscall.SIGINT)
			}
			r.waitExit(t)
			for _, p := range pids {
				waitFor(t, 10*time.Second, "pid to be gone", func() bool { return !alive(p) })
			}
		})
	}
}

// TestShutdownDuringAForegroundCall: a signal ends `dsh serve` promptly even while a
// foreground call runs, and its process is gone.
func TestShutdownDuringAForegroundCall(t *testing.T) {
	ws := t.TempDir()
	r := startRaw(t, ws)
	r.initialize(t)
	r.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo $$ > pid; exec sleep 300","description":"Sleep in the foreground"}}}`)
	pid := readPidFile(t, filepath.Join(ws, "pid"))
	r.cmd.Process.Signal(syscall.SIGTERM)
	r.waitExit(t)
	waitFor(t, 10*time.Second, "the foreground process to be gone", func() bool { return !alive(pid) })
}
