package sessionlog

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
	bashlocal "github.com/dsh-dev/dsh/plugins/bashlocal"
	"github.com/dsh-dev/dsh/plugins/jobs"
	"github.com/dsh-dev/dsh/plugins/prompt"
	"github.com/dsh-dev/dsh/plugins/roles"
	"github.com/dsh-dev/dsh/plugins/rules"
	shellenv "github.com/dsh-dev/dsh/plugins/shellenv"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	toolbash "github.com/dsh-dev/dsh/plugins/toolbash"
	"github.com/dsh-dev/dsh/plugins/tools"
)

func TestMain(m *testing.M) { proctest.Main(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// harness is a composition with the bash tool over bash-local, jobs, a rules row that
// denies `rm`, and a session-log row.
type harness struct {
	t    testing.TB
	rt   *container.Runtime
	reg  *tools.Registry
	home string
	ws   string
}

func newHarness(t testing.TB, logConfig map[string]any) *harness {
	t.Helper()
	h := &harness{t: t, home: t.TempDir(), ws: t.TempDir()}
	cat, err := container.NewCatalog(tools.Plugin, prompt.Plugin, subprocess.Plugin, shellenv.Plugin, jobs.Plugin,
		bashlocal.Plugin, toolbash.Plugin, rules.Plugin, roles.Plugin, Plugin)
	if err != nil {
		t.Fatal(err)
	}
	h.rt = container.NewRuntime(cat, container.Options{Logger: quiet})
	t.Cleanup(h.rt.Close)
	rows := []container.Row{
		{ID: "tools", Plugin: "tools"},
		{ID: "prompt", Plugin: "prompt"},
		{ID: "subprocess", Plugin: "subprocess"},
		{ID: "shell-env", Plugin: "shell-env", Config: map[string]any{"dshHome": h.home}},
		{ID: "jobs", Plugin: "jobs"},
		{ID: "bash", Plugin: "bash-local", Config: map[string]any{"maxOutputBytes": 100, "graceMs": 500}},
		{ID: "tool-bash", Plugin: "tool-bash"},
		{ID: "rules", Plugin: "rules", Config: map[string]any{"rules": []any{map[string]any{"id": "no-rm", "deny": "rm *"}}}},
		{ID: "roles", Plugin: "roles", Config: map[string]any{"roles": map[string]any{"writer": map[string]any{}}}},
		{ID: "session-log", Plugin: "session-log", Config: logConfig},
	}
	if err := h.rt.Compose("test-profile", rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range h.rt.Status().Rows {
		if r.State != container.StateActive {
			t.Fatalf("row %s is %s: %s", r.ID, r.State, r.Error)
		}
	}
	h.reg, _ = container.Lookup(h.rt, tools.Service)
	return h
}

func (h *harness) session(id string) *container.Session {
	return &container.Session{ID: id, Cwd: h.ws, Role: "writer"}
}

func (h *harness) bash(s *container.Session, args map[string]any) tools.Result {
	h.t.Helper()
	if _, ok := args["description"]; !ok {
		args["description"] = "Run a test command"
	}
	b, _ := json.Marshal(args)
	return h.reg.Call(context.Background(), "bash", b, s)
}

// file is the session's audit file.
func (h *harness) file(id string) string { return filepath.Join(h.home, "sessions", id+".jsonl") }

// records waits until the file at path holds n records and returns them.
func records(t testing.TB, path string, n int) []map[string]any {
	t.Helper()
	var recs []map[string]any
	proctest.WaitFor(t, 10*time.Second, "the audit records", func() bool {
		recs = readRecords(t, path)
		return len(recs) >= n
	})
	return recs
}

func readRecords(t testing.TB, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: not JSON: %q", path, sc.Text())
		}
		out = append(out, r)
	}
	return out
}

// keys are a record's keys, sorted, joined by spaces.
func keys(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sortStrings(ks)
	return strings.Join(ks, " ")
}
