package toolbash_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// Without a way to hand over — background disabled, the jobs plugin absent — a tty
// command waiting for input and a command at its timeout end as they always did:
// killed at the timeout, rendered byte for byte; so does a command at its timeout
// with onTimeout kill.
func TestNoHandOverWithoutJobs(t *testing.T) {
	for name, setup := range map[string]realSetup{
		"background disabled": {toolConfig: map[string]any{"enableRunInBackground": false, "onTimeout": "background"}},
		"onTimeout kill":      {},
	} {
		t.Run(name, func(t *testing.T) {
			h := newReal(t, setup)
			s, _ := newSession("s", h.cwd)
			if name == "background disabled" {
				expect(t, h.call(t, s, "bash", bashArgs(`read -p "Name: " n`, `"tty":true`, `"timeoutMs":1500`)),
					"Name: \n[timed out after 1500ms]\n[killed by signal: SIGTERM]", false)
			}
			expect(t, h.call(t, s, "bash", bashArgs("sleep 60", `"timeoutMs":100`)), "(no output)\n[timed out after 100ms]\n[killed by signal: SIGTERM]", false)
		})
	}
	h := newReal(t, realSetup{toolConfig: map[string]any{"onTimeout": "background"}})
	if err := h.rt.Unmount("jobs"); err != nil {
		t.Fatal(err)
	}
	expect(t, h.call(t, nil, "bash", bashArgs("sleep 60", `"timeoutMs":100`)), "(no output)\n[timed out after 100ms]\n[killed by signal: SIGTERM]", false)
}

// When the session's job limit refuses the hand-over, the command at its timeout is
// killed as a timeout; one waiting for input waits on until its timeout.
func TestHandOverRefusedByTheLimit(t *testing.T) {
	h := newReal(t, realSetup{toolConfig: map[string]any{"onTimeout": "background"}})
	s, _ := newSession("owner", h.cwd)
	for i := 0; i < 10; i++ {
		h.call(t, s, "bash", bashArgs("exec sleep 60", `"run_in_background":true`))
	}
	res := h.call(t, s, "bash", bashArgs("echo started; sleep 60", `"timeoutMs":300`))
	expect(t, res, "started\n[timed out after 300ms]\n[killed by signal: SIGTERM]", false)
	if v, ok := res.Value.(toolbash.ForegroundValue); !ok || !v.TimedOut || v.TimeoutMs != 300 {
		t.Errorf("typed value %#v", res.Value)
	}
	expect(t, h.call(t, s, "bash", bashArgs(`read -p "Name: " n`, `"tty":true`, `"timeoutMs":1500`)),
		"Name: \n[timed out after 1500ms]\n[killed by signal: SIGTERM]", false)
	h.rt.EndSession("owner")
}

// A tty command that sleeps quietly is not taken for one waiting for input; tty is
// refused where the executor has no terminals (the fake), and false is accepted.
func TestTTYNotWaiting(t *testing.T) {
	h := newReal(t, realSetup{})
	s, _ := newSession("s", h.cwd)
	expect(t, h.call(t, s, "bash", bashArgs("sleep 1.5; echo slept", `"tty":true`)), "slept\n", false)

	f := newHarness(t, setup{})
	expect(t, f.call(t, nil, bashArgs("ls", `"tty":true`)), "Error: tty is not available in this composition (the executor runs no terminals)", true)
	if f.exec.requestCount() != 0 {
		t.Error("a refused tty call ran")
	}
}

// The progress meter names the output's last line, as the terminal shows it.
func TestMeterLastLine(t *testing.T) {
	h := newReal(t, realSetup{})
	s, _ := newSession("s", h.cwd)
	m := &tools.Meter{}
	ctx := tools.WithMeter(context.Background(), m)
	gate := h.cwd + "/gate"
	done := make(chan tools.Result, 1)
	go func() {
		done <- h.tools.Call(ctx, "bash", json.RawMessage(bashArgs(`printf 'one\ntwo\n\033[32mbuilding 10%%\rbuilding 50%%'; while [ ! -e gate ]; do sleep 0.01; done`, `"tty":true`)), s)
	}()
	waitFor(t, 10*time.Second, "the last line", func() bool { l, _ := m.LastLine(); return l == "building 50%" })
	if n, ok := m.Bytes(); !ok || n == 0 {
		t.Errorf("bytes %d %v", n, ok)
	}
	writeFile(t, gate)
	if res := <-done; !strings.HasSuffix(res.Text, "building 50%") {
		t.Errorf("result %q", res.Text)
	}
	var long tools.Meter
	long.TrackLine(func() string { return strings.Repeat("é", 200) })
	if l, ok := long.LastLine(); !ok || l != strings.Repeat("é", tools.MaxLastLine) {
		t.Errorf("a long line: %q", l)
	}
	var none *tools.Meter
	if _, ok := none.LastLine(); ok {
		t.Error("a nil meter has a line")
	}
}

// The description teaches tty and the timeout hand-over only where they exist.
func TestDescriptionTeachesTTYAndHandOver(t *testing.T) {
	d := toolbash.Description(true, "", true, true)
	for _, p := range []string{"tty: true", "[waiting for input: continuing as background job <id>;", "job_write", `\u0003 is Ctrl-C`,
		"[still running after Nms: continuing as background job <id>;", "is not killed"} {
		if !strings.Contains(d, p) {
			t.Errorf("description lacks %q:\n%s", p, d)
		}
	}
	d = toolbash.Description(false, "", true, true)
	if strings.Contains(d, "job_write") || strings.Contains(d, "still running") || !strings.Contains(d, "tty: true") {
		t.Errorf("background disabled:\n%s", d)
	}
	if d := toolbash.Description(true, "", false, false); strings.Contains(d, "tty") || strings.Contains(d, "still running") {
		t.Errorf("no terminals, onTimeout kill:\n%s", d)
	}
}

func writeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}
