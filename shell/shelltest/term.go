package shelltest

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/shell"
)

// termRuns is how many commands TermOnce tears down, half by Kill and half by their
// timeout: a wrapper that sends a second SIGTERM does so in most teardowns, but not in
// every one (two signals that arrive before the first is handled count once).
const termRuns = 12

// termOnce checks that each process receives one SIGTERM per teardown, by Kill and by
// timeout alike: a command counts the SIGTERMs it handles (its trap runs during a
// builtin read, at once) and exits a moment after the first. A wrapper that forwards
// the signal to a process that got it already (coreutils timeout does, to its child
// and its group) shows as a count of 2 or 3.
func (k *kit) termOnce(t *testing.T) {
	e := k.env(t, nil)
	counter := func(i int) string { return e.dir + "/term-" + strconv.Itoa(i) }
	command := func(i int) string {
		fifo := proctest.Quote(e.dir + "/idle-" + strconv.Itoa(i))
		return "trap 'printf T >> " + proctest.Quote(counter(i)) + "; n=$((n+1))' TERM; mkfifo " + fifo + " && exec 9<> " + fifo +
			" && echo ready && while [ \"${n:-0}\" = 0 ] || [ $((after+=1)) -le 6 ]; do read -r -t 0.05 -u 9; done"
	}
	var wg sync.WaitGroup
	judged := make([]bool, termRuns) // whether run i had its trap set when the TERM came
	for i := range termRuns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			judged[i] = k.tearDown(t, e, command(i), i%2 == 0)
		}()
	}
	wg.Wait()
	var read strings.Builder
	for i := range termRuns {
		read.WriteString("; printf '%s\\n' \"$(cat " + proctest.Quote(counter(i)) + " 2>/dev/null)\"")
	}
	res := e.run(shell.ExecRequest{Command: "true" + read.String()})
	counts := strings.Split(strings.TrimSuffix(res.Stdout.Text, "\n"), "\n")
	if len(counts) != termRuns {
		t.Fatalf("reading the counts: %q", res.Stdout.Text)
	}
	for i, c := range counts {
		how := "Kill"
		if i%2 == 1 {
			how = "its timeout"
		}
		switch {
		case !judged[i]:
			t.Logf("run %d (%s): the TERM came before the command set its trap; not judged", i, how)
		case len(c) != 1:
			t.Errorf("run %d, torn down by %s: the command handled %d SIGTERMs; each process must receive one per teardown", i, how, len(c))
		}
	}
}

// tearDown runs command and ends it by Kill once it is ready (byKill), or by its
// timeout, and reports whether the command was ready (its trap set) before it was
// ended: only then can its count be judged.
func (k *kit) tearDown(t *testing.T, e *env, command string, byKill bool) bool {
	if !byKill {
		x, err := e.ex.Execute(context.Background(), e.spec(shell.ExecRequest{Command: command, TimeoutMs: f64(1000)}))
		if err != nil {
			t.Errorf("Execute: %v", err)
			return false
		}
		res, err := x.Result(context.Background())
		if err != nil || !res.TimedOut {
			t.Errorf("a command that outlives its timeout: %+v, %v", res, err)
		}
		return strings.HasPrefix(res.Stdout.Text, "ready\n")
	}
	x, err := e.ex.Execute(context.Background(), e.spec(shell.ExecRequest{Command: command, Expiry: shell.ExpiryNone}))
	if err != nil {
		t.Errorf("Execute: %v", err)
		return false
	}
	var got strings.Builder
	ready := proctest.Until(20*time.Second, func() bool {
		got.WriteString(x.ReadOutput().Delta)
		return strings.HasPrefix(got.String(), "ready\n")
	})
	x.Kill()
	select {
	case <-x.Done():
	case <-time.After(grace*time.Millisecond + 20*time.Second):
		t.Errorf("a killed command did not end")
	}
	if !ready {
		t.Errorf("the command never said it was ready: %q", got.String())
	}
	return ready
}
