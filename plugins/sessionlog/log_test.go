package sessionlog

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
)

func sortStrings(s []string) { sort.Strings(s) }

// A session's file holds its session record, then one record per call — allowed,
// denied, timed out, a background start — and its job's start and finish, with the
// documented fields and no output or environment.
func TestRecords(t *testing.T) {
	t.Setenv("AUDIT_CANARY", "canary-env-value")
	h := newHarness(t, nil)
	s := h.session("s-records")
	out := h.bash(s, map[string]any{"command": `echo "$DSH_SESSION_JSONL"; printf 'secret-%s\n' output; seq 1 100 >&2; exit 3`})
	if !strings.HasPrefix(out.Text, h.file("s-records")+"\n") {
		t.Fatalf("DSH_SESSION_JSONL: %q", out.Text)
	}
	if res := h.bash(s, map[string]any{"command": "rm -rf build"}); !strings.HasPrefix(res.Text, `Error: command denied by policy: rule "no-rm"`) {
		t.Fatal(res.Text)
	}
	h.bash(s, map[string]any{"command": "sleep 30", "timeoutMs": 100})
	started := h.bash(s, map[string]any{"command": "printf 'job-%s' output", "run_in_background": true})
	if started.Text != "started background job bash-1" {
		t.Fatal(started.Text)
	}
	recs := records(t, h.file("s-records"), 7)
	h.rt.EndSession(s.ID)

	types := []string{}
	for _, r := range recs {
		types = append(types, r["type"].(string)+"/"+str(r["event"]))
	}
	// The job's start is recorded from inside the call that starts it, before the call's
	// own record; its finish comes whenever it finishes.
	wantTypes := []string{"session/", "call/", "call/", "call/", "job/started", "call/", "job/finished"}
	if !slices.Equal(types, wantTypes) && !slices.Equal(types, []string{"session/", "call/", "call/", "call/", "job/started", "job/finished", "call/"}) {
		t.Fatalf("records %q", types)
	}
	sess := recs[0]
	if keys(sess) != "profile role session ts type version workspace" || sess["session"] != "s-records" || sess["role"] != "writer" ||
		sess["workspace"] != h.ws || sess["profile"] != "test-profile" || sess["version"] == "" {
		t.Errorf("session record %v", sess)
	}
	if _, err := time.Parse(time.RFC3339Nano, sess["ts"].(string)); err != nil {
		t.Errorf("ts: %v", err)
	}
	calls := filter(recs, "call")
	for _, c := range calls {
		if keys(c) != "arguments decision result session tool ts type" && keys(c) != "approval arguments decision result session tool ts type" {
			t.Errorf("call record keys %q", keys(c))
		}
		if keys(c["result"].(map[string]any)) != "durationMs exitCode isError limit signal spill stderrBytes stdoutBytes timedOut" {
			t.Errorf("result keys %q", keys(c["result"].(map[string]any)))
		}
		if keys(c["decision"].(map[string]any)) != "result source" {
			t.Errorf("decision keys %q", keys(c["decision"].(map[string]any)))
		}
	}
	ran := calls[0]
	res := ran["result"].(map[string]any)
	if ran["tool"] != "bash" || ran["arguments"].(map[string]any)["description"] != "Run a test command" ||
		mustJSON(ran["decision"]) != `{"result":"allow","source":"default for \"echo \\\"$DSH_SESSION_JSONL\\\"\""}` || res["exitCode"] != float64(3) || res["signal"] != nil ||
		res["timedOut"] != false || res["isError"] != false || res["stderrBytes"] != float64(292) || res["limit"] != nil ||
		len(res["spill"].([]any)) != 1 || res["durationMs"].(float64) <= 0 {
		t.Errorf("allowed call %s", mustJSON(ran))
	}
	denied := calls[1]
	if mustJSON(denied["decision"]) != `{"result":"deny","source":"rule \"no-rm\""}` || denied["result"].(map[string]any)["isError"] != true ||
		denied["result"].(map[string]any)["exitCode"] != nil {
		t.Errorf("denied call %s", mustJSON(denied))
	}
	timeout := calls[2]["result"].(map[string]any)
	if timeout["timedOut"] != true || timeout["signal"] != "SIGTERM" || timeout["exitCode"] != nil {
		t.Errorf("timed out call %s", mustJSON(timeout))
	}
	jobsSeen := filter(recs, "job")
	for _, j := range jobsSeen {
		if keys(j) != "detail event job session status ts type" || j["job"] != "bash-1" || j["session"] != "s-records" {
			t.Errorf("job record %v", j)
		}
	}
	if j := jobsSeen[1]; j["event"] != "finished" || j["status"] != "completed" || j["detail"] != "exit code: 0" {
		t.Errorf("finish %v", j)
	}
	data, _ := os.ReadFile(h.file("s-records"))
	for _, secret := range []string{"secret-output", "job-output", "canary-env-value", "\n99\n"} {
		if strings.Contains(string(data), secret) {
			t.Errorf("the audit file holds %q", secret)
		}
	}
	if fi, err := os.Stat(h.file("s-records")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v %v", fi, err)
	}
}

// A session's file rotates to <file>.1 past maxBytes; the file itself stays (the same
// inode), so a read-only view of it keeps showing the current records.
func TestRotation(t *testing.T) {
	h := newHarness(t, map[string]any{"maxBytes": 2000})
	s := h.session("s-rotate")
	h.bash(s, map[string]any{"command": "true"})
	before, err := os.Stat(h.file("s-rotate"))
	if err != nil {
		t.Fatal(err)
	}
	for range 12 {
		h.bash(s, map[string]any{"command": "true"})
	}
	proctest.WaitFor(t, 10*time.Second, "a rotation", func() bool {
		_, err := os.Stat(h.file("s-rotate") + ".1")
		return err == nil
	})
	after, _ := os.Stat(h.file("s-rotate"))
	old, _ := os.Stat(h.file("s-rotate") + ".1")
	if !os.SameFile(before, after) || after.Size() > 2000 || old.Size() > 2000 {
		t.Fatalf("sizes %d / %d, same file %v", after.Size(), old.Size(), os.SameFile(before, after))
	}
	if recs := readRecords(t, h.file("s-rotate")+".1"); len(recs) == 0 || recs[len(recs)-1]["type"] != "call" {
		t.Fatalf("%v", recs)
	}
}

// Files nobody wrote to for retainDays are removed when the row starts.
func TestRetention(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, "logs")
	os.MkdirAll(dir, 0o700)
	old, recent, other := filepath.Join(dir, "old.jsonl"), filepath.Join(dir, "recent.jsonl"), filepath.Join(dir, "notes.txt")
	for _, p := range []string{old, old + ".1", recent, other} {
		os.WriteFile(p, []byte("{}\n"), 0o600)
	}
	past := time.Now().Add(-3 * 24 * time.Hour)
	for _, p := range []string{old, old + ".1", other} {
		os.Chtimes(p, past, past)
	}
	newHarness(t, map[string]any{"dir": dir, "retainDays": 2})
	proctest.WaitFor(t, 10*time.Second, "the pruning", func() bool {
		_, err := os.Stat(old)
		_, err1 := os.Stat(old + ".1")
		return os.IsNotExist(err) && os.IsNotExist(err1)
	})
	for _, p := range []string{recent, other} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was pruned: %v", p, err)
		}
	}
}

// A disk that stalls never holds up a call: the queue fills, further records are
// dropped and counted, the row's status says so; once the disk is back, records are
// written again.
func TestStalledDiskDoesNotStallCalls(t *testing.T) {
	release := make(chan struct{})
	stalled := make(chan struct{}, 1)
	put = func(f *os.File, b []byte) (int, error) {
		select {
		case stalled <- struct{}{}:
		default:
		}
		<-release
		return f.Write(b)
	}
	queueSize = 4
	t.Cleanup(func() { put, queueSize = (*os.File).Write, 4096 })
	h := newHarness(t, nil)
	s := h.session("s-stall")
	h.bash(s, map[string]any{"command": "true"})
	<-stalled // the writer is stuck in its first write
	for i := range 10 {
		start := time.Now()
		if res := h.bash(s, map[string]any{"command": "true"}); res.Text != "(no output)" {
			t.Fatal(res.Text)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("call %d took %v while the disk stalled", i, d)
		}
	}
	proctest.WaitFor(t, 10*time.Second, "the drops in the row's status", func() bool {
		return strings.Contains(detail(h), "records dropped (queue full)")
	})
	close(release)
	h.bash(s, map[string]any{"command": "echo after"})
	proctest.WaitFor(t, 10*time.Second, "the writer to catch up", func() bool {
		recs := readRecords(t, h.file("s-stall"))
		return len(recs) > 0 && strings.Contains(mustJSON(recs[len(recs)-1]), "echo after")
	})
}

// A write that fails is counted, logged and shown in the row's status: here the
// rotation's temporary file is in the way.
func TestWriteFailureIsCounted(t *testing.T) {
	h := newHarness(t, map[string]any{"maxBytes": 600})
	s := h.session("s-fail")
	if err := os.Mkdir(h.file("s-fail")+".1.tmp", 0o700); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		h.bash(s, map[string]any{"command": "true"})
	}
	proctest.WaitFor(t, 10*time.Second, "the failure in the row's status", func() bool {
		return strings.Contains(detail(h), "write failures (last: rotate "+h.file("s-fail")+": open ")
	})
}

// Sessions without an id get no file; a session id that is not a file name is hashed.
func TestFileNames(t *testing.T) {
	if got := fileName("s-1_a.b"); got != "s-1_a.b.jsonl" {
		t.Fatal(got)
	}
	for _, id := range []string{"../x", "a/b", ".hidden", strings.Repeat("x", 200), ""} {
		if got := fileName(id); len(got) != 64+6 || strings.ContainsAny(got, "/") {
			t.Errorf("%q: %q", id, got)
		}
	}
	h := newHarness(t, nil)
	h.bash(nil, map[string]any{"command": "true"})
	if entries, _ := os.ReadDir(filepath.Join(h.home, "sessions")); len(entries) != 0 {
		t.Fatalf("a session-less call made %v", entries)
	}
}

func detail(h *harness) string {
	for _, r := range h.rt.Status().Rows {
		if r.ID == "session-log" {
			return r.Detail
		}
	}
	return ""
}

func filter(recs []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		if r["type"] == typ {
			out = append(out, r)
		}
	}
	return out
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
