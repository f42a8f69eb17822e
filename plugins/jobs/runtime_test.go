package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/jobs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newRuntime(t *testing.T, opts jobs.Options) *jobs.Runtime {
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	rt := jobs.NewRuntime(opts)
	t.Cleanup(rt.Close)
	return rt
}

func start(t *testing.T, rt *jobs.Runtime, kind, label string, owner *container.Session) (*work, jobs.Snapshot) {
	t.Helper()
	w := newWork()
	snap, err := rt.Start(jobs.Spec{Kind: kind, Label: label, Owner: owner, Run: w.run})
	if err != nil {
		t.Fatal(err)
	}
	return w, snap
}

func TestStartChecksInOrder(t *testing.T) {
	rt := newRuntime(t, jobs.Options{MaxConcurrentPerOwner: 1})
	s, _ := session("s1")
	ran := 0
	run := func() (jobs.Hooks, error) { ran++; return newWork().hooks(), nil }
	cases := []struct {
		spec jobs.Spec
		want string
	}{
		{jobs.Spec{Kind: "", Label: "", Owner: s, Run: run}, "invalid job kind: expected a non-empty string"},
		{jobs.Spec{Kind: "bash", Label: "", Owner: s, Run: run}, "invalid job label: expected a non-empty string"},
		{jobs.Spec{Kind: "bash", Label: " \n", Owner: s, Run: run}, "invalid job label: expected a non-empty string"},
	}
	for _, tc := range cases {
		if _, err := rt.Start(tc.spec); err == nil || err.Error() != tc.want || !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("Start(%+v) = %v, want %q", tc.spec, err, tc.want)
		}
	}
	w, first := start(t, rt, "bash", "sleep 60", s)
	if first.ID != "bash-1" || first.Status != jobs.StatusRunning || first.Owner != "s1" {
		t.Fatalf("first job = %+v", first)
	}
	ran = 0
	_, err := rt.Start(jobs.Spec{Kind: "bash", Label: "x", Owner: s, Run: run})
	const limit = "background job limit reached for this owner (limit: 1); use job_kill to stop an unneeded job, wait for it to finish, then retry"
	if err == nil || err.Error() != limit || !errors.Is(err, jobs.ErrLimit) {
		t.Fatalf("over the limit: %v", err)
	}
	if ran != 0 {
		t.Fatal("run() called although the limit was reached")
	}
	// Another owner has its own budget.
	other, _ := session("s2")
	start(t, rt, "bash", "y", other)
	w.finish(jobs.Outcome{Status: jobs.StatusCompleted, Detail: "exit code: 0"})
	waitFor(t, 10*time.Second, "bash-1 to finish", func() bool {
		got, _ := rt.Get(s, "bash-1")
		return got.Status.Terminal()
	})
	if _, snap := start(t, rt, "bash", "z", s); snap.ID != "bash-3" {
		t.Fatalf("next id = %s, want bash-3", snap.ID)
	}
}

func TestRunFailureRegistersNothing(t *testing.T) {
	rt := newRuntime(t, jobs.Options{})
	_, err := rt.Start(jobs.Spec{Kind: "bash", Label: "x", Run: func() (jobs.Hooks, error) { return jobs.Hooks{}, errors.New("spawn failed: ENOENT") }})
	if err == nil || err.Error() != "spawn failed: ENOENT" {
		t.Fatalf("Start = %v", err)
	}
	_, err = rt.Start(jobs.Spec{Kind: "bash", Label: "x", Run: func() (jobs.Hooks, error) { panic("boom") }})
	if err == nil {
		t.Fatal("panicking run registered")
	}
	cancelled := false
	_, err = rt.Start(jobs.Spec{Kind: "bash", Label: "x", Run: func() (jobs.Hooks, error) {
		return jobs.Hooks{Cancel: func() { cancelled = true }}, nil
	}})
	if err == nil || !cancelled {
		t.Fatalf("hooks without Done: err=%v cancelled=%v", err, cancelled)
	}
	if got := rt.List(nil); len(got) != 0 {
		t.Fatalf("List = %+v", got)
	}
	if _, snap := start(t, rt, "bash", "ok", nil); snap.ID != "bash-1" {
		t.Fatalf("id after failures = %s, want bash-1 (failed starts use no id)", snap.ID)
	}
}

func TestIDsPerKind(t *testing.T) {
	rt := newRuntime(t, jobs.Options{})
	var ids []string
	for _, kind := range []string{"bash", "bash", "agent", "bash", "agent"} {
		_, snap := start(t, rt, kind, "l", nil)
		ids = append(ids, snap.ID)
	}
	want := []string{"bash-1", "bash-2", "agent-1", "bash-3", "agent-2"}
	if !reflect.DeepEqual(ids, want) {
		t.Fatalf("ids = %q, want %q", ids, want)
	}
	var listed []string
	for _, s := range rt.List(nil) {
		listed = append(listed, s.ID)
	}
	if !reflect.DeepEqual(listed, want) {
		t.Fatalf("List order = %q, want start order", listed)
	}
}

func TestOwnerFencing(t *testing.T) {
	rt := newRuntime(t, jobs.Options{})
	a, _ := session("a")
	b, _ := session("b")
	start(t, rt, "bash", "mine", a)
	start(t, rt, "bash", "shared", nil)
	for _, caller := range []*container.Session{b, nil, {ID: ""}} {
		if _, err := rt.Get(caller, "bash-1"); err == nil || err.Error() != "job bash-1 belongs to another session" || !errors.Is(err, jobs.ErrNotOwner) {
			t.Errorf("Get by %+v = %v", caller, err)
		}
		if _, err := rt.Read(context.Background(), caller, "bash-1", 0); err == nil || err.Error() != "job bash-1 belongs to another session" {
			t.Errorf("Read by %+v = %v", caller, err)
		}
		if _, _, err := rt.Kill(caller, "bash-1", ""); err == nil || err.Error() != "job bash-1 belongs to another session" {
			t.Errorf("Kill by %+v = %v", caller, err)
		}
		if _, err := rt.Wait(context.Background(), caller, "bash-1", time.Millisecond); err == nil || err.Error() != "job bash-1 belongs to another session" {
			t.Errorf("Wait by %+v = %v", caller, err)
		}
		if _, err := rt.Get(caller, "bash-2"); err != nil {
			t.Errorf("unowned job hidden from %+v: %v", caller, err)
		}
	}
	if _, err := rt.Get(a, "bash-9"); err == nil || err.Error() != "unknown job bash-9" || !errors.Is(err, jobs.ErrUnknownJob) {
		t.Fatalf("unknown: %v", err)
	}
	if got := len(rt.List(a)); got != 2 {
		t.Fatalf("owner sees %d jobs, want 2", got)
	}
	if got := rt.List(b); len(got) != 1 || got[0].ID != "bash-2" {
		t.Fatalf("other session sees %+v", got)
	}
}

func TestReadsConsume(t *testing.T) {
	rt := newRuntime(t, jobs.Options{})
	s, _ := session("s")
	w, _ := start(t, rt, "bash", "x", s)
	ctx := context.Background()
	w.write("a\n")
	out, err := rt.Read(ctx, s, "bash-1", 0)
	if err != nil || out.Text != "a\n" || out.Job.Status != jobs.StatusRunning {
		t.Fatalf("read 1 = %+v, %v", out, err)
	}
	if out, _ = rt.Read(ctx, s, "bash-1", 0); out.Text != "" {
		t.Fatalf("read 2 repeated output: %q", out.Text)
	}
	w.write("b\n")
	w.finish(jobs.Outcome{Status: jobs.StatusCompleted, Detail: "exit code: 0"})
	out, err = rt.Read(ctx, s, "bash-1", 10*time.Second)
	if err != nil || out.Text != "b\n" || out.Job.Status != jobs.StatusCompleted || out.Job.Detail != "exit code: 0" {
		t.Fatalf("final read = %+v, %v", out, err)
	}
}

func TestKillAndFirstOutcomeWins(t *testing.T) {
	rt := newRuntime(t, jobs.Options{})
	s, n := session("s")
	w, _ := start(t, rt, "bash", "sleep 60", s)
	w.ignoreCancel = true
	res, snap, err := rt.Kill(s, "bash-1", "not needed")
	if err != nil || res != jobs.KillCancellationRequested || snap.Status != jobs.StatusStopping || snap.KillReason != "not needed" {
		t.Fatalf("Kill = %v %+v %v", res, snap, err)
	}
	if res, _, _ := rt.Kill(s, "bash-1", "again"); res != jobs.KillCancellationRequested {
		t.Fatalf("second Kill while stopping = %v", res)
	}
	if w.cancels.Load() != 2 {
		t.Fatalf("cancel called %d times", w.cancels.Load())
	}
	w.finish(jobs.Outcome{Status: jobs.StatusKilled, Detail: "signal: SIGTERM"})
	w.finish(jobs.Outcome{Status: jobs.StatusCompleted, Detail: "exit code: 0"}) // ignored: the work is already done
	snap, err = rt.Wait(context.Background(), s, "bash-1", 10*time.Second)
	if err != nil || snap.Status != jobs.StatusKilled || snap.Detail != "signal: SIGTERM" || snap.KillReason != "not needed" {
		t.Fatalf("after kill: %+v %v", snap, err)
	}
	res, snap, err = rt.Kill(s, "bash-1", "")
	if err != nil || res != jobs.KillAlreadyFinished || snap.StatusLine() != "[status: killed, signal: SIGTERM]" {
		t.Fatalf("Kill finished = %v %+v %v", res, snap, err)
	}
	if w.outcomeCalls.Load() != 1 {
		t.Fatalf("Outcome called %d times", w.outcomeCalls.Load())
	}
	waitFor(t, 10*time.Second, "the notice", func() bool { return len(n.All()) == 1 })
	if got := n.All()[0]; got != "background job bash-1 (bash: sleep 60) finished [status: killed, signal: SIGTERM]. Read its output with job_output." {
		t.Fatalf("notice = %q", got)
	}
}

func TestBadOutcomesAreFailed(t *testing.T) {
	rt := newRuntime(t, jobs.Options{})
	w, _ := start(t, rt, "bash", "x", nil)
	w.finish(jobs.Outcome{Status: jobs.StatusRunning})
	snap, _ := rt.Wait(context.Background(), nil, "bash-1", 10*time.Second)
	if snap.StatusLine() != `[status: failed, producer reported non-terminal status "running"]` {
		t.Fatalf("non-terminal outcome: %+v", snap)
	}
	_, err := rt.Start(jobs.Spec{Kind: "bash", Label: "y", Run: func() (jobs.Hooks, error) {
		done := make(chan struct{})
		close(done)
		return jobs.Hooks{Done: done, Outcome: func() jobs.Outcome { panic("bad producer") }}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	snap, _ = rt.Wait(context.Background(), nil, "bash-2", 10*time.Second)
	if snap.StatusLine() != "[status: failed, producer panicked: bad producer]" {
		t.Fatalf("panicking outcome: %+v", snap)
	}
	if out, _ := rt.Read(context.Background(), nil, "bash-2", 0); out.Text != "" {
		t.Fatalf("nil ReadOutput gave %q", out.Text)
	}
}

func TestWaitTimeoutReturnsSnapshot(t *testing.T) {
	rt := newRuntime(t, jobs.Options{})
	w, _ := start(t, rt, "bash", "x", nil)
	snap, err := rt.Wait(context.Background(), nil, "bash-1", 20*time.Millisecond)
	if err != nil || snap.Status != jobs.StatusRunning {
		t.Fatalf("Wait timeout = %+v, %v", snap, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := rt.Wait(ctx, nil, "bash-1", time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait cancelled = %v", err)
	}
	if _, err := rt.Read(ctx, nil, "bash-1", time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read cancelled = %v", err)
	}
	go w.finish(jobs.Outcome{Status: jobs.StatusCompleted, Detail: "exit code: 0"})
	snap, err = rt.Wait(context.Background(), nil, "bash-1", time.Hour)
	if err != nil || snap.Status != jobs.StatusCompleted || snap.FinishedAt.IsZero() {
		t.Fatalf("Wait done = %+v, %v", snap, err)
	}
}

func TestNoticeOncePerOwnedJob(t *testing.T) {
	rt := newRuntime(t, jobs.Options{})
	s, n := session("s")
	w, _ := start(t, rt, "bash", "make\ntest", s)
	w.finish(jobs.Outcome{Status: jobs.StatusCompleted, Detail: "exit code: 0"})
	waitFor(t, 10*time.Second, "a notice", func() bool { return len(n.All()) > 0 })
	// The notice keeps to one line.
	want := "background job bash-1 (bash: make test) finished [status: completed, exit code: 0]. Read its output with job_output."
	if got := n.All(); !reflect.DeepEqual(got, []string{want}) {
		t.Fatalf("notices = %q", got)
	}
	// Reading and killing afterwards sends nothing more.
	_, _ = rt.Read(context.Background(), s, "bash-1", 0)
	_, _, _ = rt.Kill(s, "bash-1", "")
	if got := len(n.All()); got != 1 {
		t.Fatalf("%d notices", got)
	}
	// Unowned jobs notify no one; a nil Notifier is fine.
	w2, _ := start(t, rt, "bash", "x", nil)
	w3, _ := start(t, rt, "bash", "y", &container.Session{ID: "quiet"})
	w2.finish(jobs.Outcome{Status: jobs.StatusCompleted})
	w3.finish(jobs.Outcome{Status: jobs.StatusCompleted})
	snap, _ := rt.Wait(context.Background(), nil, "bash-2", 10*time.Second)
	if snap.StatusLine() != "[status: completed]" {
		t.Fatalf("status line without detail = %q", snap.StatusLine())
	}
}

func TestWaitingReadReportsInsteadOfNotice(t *testing.T) {
	rt := newRuntime(t, jobs.Options{})
	s, n := session("s")
	w, _ := start(t, rt, "bash", "x", s)
	type result struct {
		out jobs.Output
		err error
	}
	got := make(chan result, 1)
	go func() {
		out, err := rt.Read(context.Background(), s, "bash-1", time.Hour)
		got <- result{out, err}
	}()
	waitFor(t, 10*time.Second, "the read to wait", func() bool { return jobs.ReadersOf(rt, "bash-1") == 1 })
	w.write("done\n")
	w.finish(jobs.Outcome{Status: jobs.StatusCompleted, Detail: "exit code: 0"})
	r := <-got
	if r.err != nil || r.out.Text != "done\n" || r.out.Job.Status != jobs.StatusCompleted {
		t.Fatalf("read = %+v", r)
	}
	if notes := n.All(); len(notes) != 0 {
		t.Fatalf("notice sent although the read reported the job: %q", notes)
	}
}

func TestEndOwnerCancelsWaitsDeletes(t *testing.T) {
	rt := newRuntime(t, jobs.Options{})
	a, na := session("a")
	b, _ := session("b")
	wa1, _ := start(t, rt, "bash", "a1", a)
	wa2, _ := start(t, rt, "bash", "a2", a)
	wb, _ := start(t, rt, "bash", "b1", b)
	wa2.finish(jobs.Outcome{Status: jobs.StatusCompleted})
	rt.EndOwner("a")
	if wa1.cancels.Load() != 1 {
		t.Fatalf("running job of the ended owner cancelled %d times", wa1.cancels.Load())
	}
	for _, id := range []string{"bash-1", "bash-2"} {
		if _, err := rt.Get(a, id); !errors.Is(err, jobs.ErrUnknownJob) {
			t.Fatalf("%s after EndOwner: %v", id, err)
		}
	}
	if snap, err := rt.Get(b, "bash-3"); err != nil || snap.Status != jobs.StatusRunning || wb.cancels.Load() != 0 {
		t.Fatalf("other owner's job touched: %+v %v", snap, err)
	}
	for _, note := range na.All() {
		if note != "background job bash-2 (bash: a2) finished [status: completed]. Read its output with job_output." {
			t.Fatalf("unexpected notice %q", note)
		}
	}
	// The session is over: nothing can start for it any more (a start racing the end
	// must not leave a job nobody can see or stop).
	w := newWork()
	if _, err := rt.Start(jobs.Spec{Kind: "bash", Label: "late", Owner: a, Run: func() (jobs.Hooks, error) { return w.hooks(), nil }}); !errors.Is(err, jobs.ErrEnded) {
		t.Fatalf("start after EndOwner: %v, want ErrEnded", err)
	}
	if w.cancels.Load() != 0 {
		t.Fatal("a refused start ran its producer")
	}
}

func TestStartRacingEndOwnerIsCancelled(t *testing.T) {
	rt := newRuntime(t, jobs.Options{})
	a, _ := session("a")
	w := newWork()
	_, err := rt.Start(jobs.Spec{Kind: "bash", Label: "racing", Owner: a, Run: func() (jobs.Hooks, error) {
		rt.EndOwner("a") // the session ends while the producer is spawning
		return w.hooks(), nil
	}})
	if !errors.Is(err, jobs.ErrEnded) {
		t.Fatalf("start racing EndOwner: %v, want ErrEnded", err)
	}
	if w.cancels.Load() != 1 {
		t.Fatalf("the started work was cancelled %d times, want 1", w.cancels.Load())
	}
	if list := rt.List(a); len(list) != 0 {
		t.Fatalf("jobs registered for an ended session: %+v", list)
	}
}

func TestDisposeTimeoutForgetsStuckJobs(t *testing.T) {
	rt := newRuntime(t, jobs.Options{DisposeTimeout: 50 * time.Millisecond, Logger: quietLogger()})
	s, _ := session("s")
	w, _ := start(t, rt, "bash", "stuck", s)
	w.ignoreCancel = true
	rt.EndOwner("s")
	if _, err := rt.Get(s, "bash-1"); !errors.Is(err, jobs.ErrUnknownJob) {
		t.Fatalf("stuck job still registered: %v", err)
	}
	w.finish(jobs.Outcome{Status: jobs.StatusCompleted})
	if w.outcomeCalls.Load() != 0 {
		t.Fatal("outcome of a forgotten job was consulted")
	}
}

func TestCloseDisposesAll(t *testing.T) {
	rt := jobs.NewRuntime(jobs.Options{Logger: quietLogger()})
	a, na := session("a")
	w1, _ := start(t, rt, "bash", "1", a)
	w2, _ := start(t, rt, "bash", "2", nil)
	rt.Close()
	rt.Close()
	if w1.cancels.Load() != 1 || w2.cancels.Load() != 1 {
		t.Fatal("Close did not cancel every job")
	}
	if len(rt.List(a)) != 0 {
		t.Fatal("jobs survived Close")
	}
	if _, err := rt.Start(jobs.Spec{Kind: "bash", Label: "x", Run: newWork().run}); !errors.Is(err, jobs.ErrClosed) {
		t.Fatalf("Start after Close = %v", err)
	}
	if len(na.All()) != 0 {
		t.Fatalf("disposal sent notices: %q", na.All())
	}
}

func TestConcurrentStartsRespectLimit(t *testing.T) {
	const limit = 5
	rt := newRuntime(t, jobs.Options{MaxConcurrentPerOwner: limit})
	s, _ := session("s")
	if started, refused := startRacing(rt, 40, func(int) *container.Session { return s }); started != limit || refused != 40-limit {
		t.Fatalf("started %d, refused %d", started, refused)
	}
}

// startRacing starts n jobs at once, the i-th owned by owner(i), and counts the starts
// that succeeded and those refused for a limit.
func startRacing(rt *jobs.Runtime, n int, owner func(i int) *container.Session) (started, refused int) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range n {
		wg.Go(func() {
			_, err := rt.Start(jobs.Spec{Kind: "bash", Label: fmt.Sprint(i), Owner: owner(i), Run: newWork().run})
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				started++
			} else if errors.Is(err, jobs.ErrLimit) {
				refused++
			}
		})
	}
	wg.Wait()
	return started, refused
}

// TestTotalLimitSpansOwners: the harness-wide cap counts every owner's live jobs (and
// starts in flight), refuses with its own message, and frees up as jobs finish.
func TestTotalLimitSpansOwners(t *testing.T) {
	rt := newRuntime(t, jobs.Options{MaxConcurrentPerOwner: 10, MaxTotal: 3})
	var works []*work
	for i := range 3 {
		s, _ := session(fmt.Sprintf("s%d", i))
		w, _ := start(t, rt, "bash", "sleep", s)
		works = append(works, w)
	}
	other, _ := session("s9")
	ran := false
	_, err := rt.Start(jobs.Spec{Kind: "bash", Label: "x", Owner: other, Run: func() (jobs.Hooks, error) { ran = true; return newWork().hooks(), nil }})
	const want = "background job limit reached: 3 jobs are running in this harness"
	if err == nil || err.Error() != want || !errors.Is(err, jobs.ErrLimit) {
		t.Fatalf("over the total limit: %v, want %q", err, want)
	}
	if ran {
		t.Fatal("run() called although the total limit was reached")
	}
	works[0].finish(jobs.Outcome{Status: jobs.StatusCompleted, Detail: "exit code: 0"})
	waitFor(t, 10*time.Second, "a free slot", func() bool {
		_, err := rt.Start(jobs.Spec{Kind: "bash", Label: "y", Owner: other, Run: newWork().run})
		return err == nil
	})
}

// TestConcurrentStartsRespectTotalLimit: racing starts of many owners never exceed the
// harness-wide cap.
func TestConcurrentStartsRespectTotalLimit(t *testing.T) {
	const limit = 7
	rt := newRuntime(t, jobs.Options{MaxConcurrentPerOwner: 10, MaxTotal: limit})
	started, refused := startRacing(rt, 40, func(i int) *container.Session {
		s, _ := session(fmt.Sprintf("s%d", i))
		return s
	})
	if started != limit || refused != 40-limit {
		t.Fatalf("started %d, refused %d", started, refused)
	}
}

// An owner that never ends (a stateless-lane principal) keeps only its newest finished
// jobs: the oldest are forgotten, live ones and other owners' never.
func TestFinishedJobsArePrunedPerOwner(t *testing.T) {
	rt := newRuntime(t, jobs.Options{MaxFinishedPerOwner: 2})
	a, _ := session("a")
	b, _ := session("b")
	wb, _ := start(t, rt, "bash", "b's", b) // bash-1
	wb.finish(jobs.Outcome{Status: jobs.StatusCompleted})
	live, _ := start(t, rt, "bash", "live", a) // bash-2
	for i := range 4 {                         // bash-3 … bash-6
		w, snap := start(t, rt, "bash", fmt.Sprint("job ", i), a)
		w.finish(jobs.Outcome{Status: jobs.StatusCompleted, Detail: "exit code: 0"})
		if _, err := rt.Wait(context.Background(), a, snap.ID, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "b's job to finish", func() bool {
		s, err := rt.Get(b, "bash-1")
		return err == nil && s.Status.Terminal()
	})
	var ids []string
	for _, s := range rt.List(a) {
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	if want := []string{"bash-2", "bash-5", "bash-6"}; !slices.Equal(ids, want) {
		t.Errorf("a's jobs %v; want %v (the live one and the two newest finished)", ids, want)
	}
	if _, err := rt.Get(a, "bash-3"); err == nil || err.Error() != "unknown job bash-3" {
		t.Errorf("a pruned job: %v; want unknown job bash-3", err)
	}
	if _, err := rt.Get(b, "bash-1"); err != nil {
		t.Errorf("b's finished job: %v", err)
	}
	live.finish(jobs.Outcome{Status: jobs.StatusCompleted})
}

// A stateless-lane principal's session ends after an idle timeout and its next one has
// the same id in a new session object: that one starts jobs at once; the ended one
// still cannot.
func TestNextSessionOfAnIDStartsJobs(t *testing.T) {
	rt := newRuntime(t, jobs.Options{})
	old, _ := session("principal")
	w, _ := start(t, rt, "bash", "before", old)
	w.finish(jobs.Outcome{Status: jobs.StatusCompleted})
	rt.EndOwner("principal")
	next, _ := session("principal")
	w2, snap := start(t, rt, "bash", "after", next)
	if snap.Owner != "principal" {
		t.Errorf("owner %q", snap.Owner)
	}
	if _, err := rt.Start(jobs.Spec{Kind: "bash", Label: "late", Owner: old, Run: newWork().run}); !errors.Is(err, jobs.ErrEnded) {
		t.Errorf("start by the ended session: %v, want ErrEnded", err)
	}
	rt.EndOwner("principal") // the next one ends too: both stay refused
	if _, err := rt.Start(jobs.Spec{Kind: "bash", Label: "late", Owner: next, Run: newWork().run}); !errors.Is(err, jobs.ErrEnded) {
		t.Errorf("start by the second ended session: %v, want ErrEnded", err)
	}
	if w2.cancels.Load() != 1 {
		t.Errorf("the second session's job was cancelled %d times at its end, want 1", w2.cancels.Load())
	}
}
