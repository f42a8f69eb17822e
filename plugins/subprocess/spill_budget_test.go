package subprocess_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
)

// spillCapture keeps a 1000-byte tail and spills up to 1 MiB.
var spillCapture = proc.Capture{MaxBytes: 1000, SpillMaxBytes: 1 << 20}

// budgetSup returns a Supervisor with the given spill budget, closed at the end of the test.
func budgetSup(t *testing.T, root string, budget int64) *subprocess.Supervisor {
	t.Helper()
	s := subprocess.New(subprocess.Options{DisableCgroups: true, SpillRoot: root, SpillBudgetBytes: budget})
	t.Cleanup(s.Close)
	return s
}

// zeros is a command printing n NUL bytes, after waiting for each gate file in turn
// before the matching count (gates[i] precedes counts[i+1]).
func zeros(counts []int, gates ...string) subprocess.Spec {
	var b strings.Builder
	for i, n := range counts {
		if i > 0 {
			fmt.Fprintf(&b, "while [ ! -e %s ]; do sleep 0.01; done; ", gates[i-1])
		}
		fmt.Fprintf(&b, "head -c %d /dev/zero; ", n)
	}
	if len(gates) >= len(counts) {
		fmt.Fprintf(&b, "while [ ! -e %s ]; do sleep 0.01; done", gates[len(counts)-1])
	}
	spec := bashSpec(b.String())
	spec.Stdout, spec.Stderr = spillCapture, spillCapture
	return spec
}

// spillOf runs a finished n-byte stream and returns its process, checking that its
// spill file holds the whole stream.
func spillOf(t *testing.T, sup *subprocess.Supervisor, n int) *subprocess.Process {
	t.Helper()
	p := spawn(t, sup, zeros([]int{n}))
	proctest.AwaitExit(t, p, 10*time.Second)
	out := p.Stdout().Output()
	if out.SpillPath == "" || out.Bytes != int64(n) {
		t.Fatalf("stream of %d bytes: spill %q, bytes %d", n, out.SpillPath, out.Bytes)
	}
	if fi, err := os.Stat(out.SpillPath); err != nil || fi.Size() != int64(n) {
		t.Fatalf("spill file %s: %v, want %d bytes", out.SpillPath, err, n)
	}
	return p
}

// checkWithdrawn asserts that p's stdout no longer reports path and that the file is gone.
func checkWithdrawn(t *testing.T, name string, p *subprocess.Process, path string) {
	t.Helper()
	out := p.Stdout().Output()
	if out.SpillPath != "" || p.Stdout().SpillPath() != "" || !out.Truncated {
		t.Errorf("%s: Output spill %q, SpillPath() %q, truncated %v; want the path withdrawn",
			name, out.SpillPath, p.Stdout().SpillPath(), out.Truncated)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s: spill file %s still there (%v)", name, path, err)
	}
}

func checkKept(t *testing.T, name string, p *subprocess.Process, path string, size int64) {
	t.Helper()
	if got := p.Stdout().Output().SpillPath; got != path {
		t.Errorf("%s: spill path %q, want %q kept", name, got, path)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != size {
		t.Errorf("%s: spill file %s: %v; want %d bytes", name, path, err, size)
	}
}

// checkAccounting asserts that the counted spill bytes are exactly what the spill
// directory holds, and within the budget.
func checkAccounting(t *testing.T, sup *subprocess.Supervisor, want int64) {
	t.Helper()
	used, disk := sup.SpillBytes(), proctest.DiskUsage(t, sup.SpillDir())
	if used != disk || used != want || used > sup.SpillBudget() {
		t.Errorf("SpillBytes %d, on disk %d, want %d (budget %d)", used, disk, want, sup.SpillBudget())
	}
}

// When a spill would pass the budget, the files of finished processes go first, oldest
// first, and only as many as needed; nothing outside the Supervisor's own directory is
// counted or touched.
func TestSpillBudgetDeletesOldestFinishedFirst(t *testing.T) {
	proctest.NoLeftovers(t)
	root := t.TempDir()
	sup := budgetSup(t, root, 300_000)

	// A neighbour sharing the spill root: another harness's files, and a stray file.
	other := budgetSup(t, root, 300_000)
	neighbour := spillOf(t, other, 200_000)
	nPath := neighbour.Stdout().SpillPath()
	stray := filepath.Join(root, "stray.log")
	if err := os.WriteFile(stray, make([]byte, 500_000), 0o600); err != nil {
		t.Fatal(err)
	}

	a, b, c := spillOf(t, sup, 100_000), spillOf(t, sup, 100_000), spillOf(t, sup, 100_000)
	aPath, bPath, cPath := a.Stdout().SpillPath(), b.Stdout().SpillPath(), c.Stdout().SpillPath()
	checkAccounting(t, sup, 300_000)

	d := spillOf(t, sup, 100_000) // room for it: A, the oldest, goes
	dPath := d.Stdout().SpillPath()
	checkWithdrawn(t, "A", a, aPath)
	checkKept(t, "B", b, bPath, 100_000)
	checkKept(t, "C", c, cPath, 100_000)
	checkAccounting(t, sup, 300_000)

	e := spillOf(t, sup, 200_000) // B then C go; D, newer, stays
	checkWithdrawn(t, "B", b, bPath)
	checkWithdrawn(t, "C", c, cPath)
	checkKept(t, "D", d, dPath, 100_000)
	checkKept(t, "E", e, e.Stdout().SpillPath(), 200_000)
	checkAccounting(t, sup, 300_000)
	if got, want := proctest.SpillFiles(t, sup.SpillDir()), []string{dPath, e.Stdout().SpillPath()}; fmt.Sprint(got) != fmt.Sprint(sortStrings(want)) {
		t.Errorf("spill dir holds %q, want %q", got, want)
	}

	// A withdrawn path is not reported again, by lossy reads either.
	if c := a.Stdout().Since(0); !c.Lossy || a.Stdout().SpillPath() != "" {
		t.Errorf("lossy read of A: lossy %v, spill %q", c.Lossy, a.Stdout().SpillPath())
	}
	checkKept(t, "the other supervisor's file", neighbour, nPath, 200_000)
	if fi, err := os.Stat(stray); err != nil || fi.Size() != 500_000 {
		t.Errorf("stray file beside the spill dir: %v", err)
	}
	if other.SpillBytes() != 200_000 {
		t.Errorf("the other supervisor counts %d bytes", other.SpillBytes())
	}
}

func sortStrings(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

// With nothing finished to free, the stream whose write does not fit stops spilling:
// its file is deleted, its path withdrawn for good (even once room appears), and it
// keeps its in-memory tail. The other streams' files are untouched.
func TestSpillBudgetRunningStreamLosesItsSpill(t *testing.T) {
	proctest.NoLeftovers(t)
	sup := budgetSup(t, t.TempDir(), 300_000)
	gates := t.TempDir()
	gate := func(name string) string { return filepath.Join(gates, name) }
	open := func(name string) {
		if err := os.WriteFile(gate(name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	r1 := spawn(t, sup, zeros([]int{250_000}, gate("r1")))
	proctest.WaitFor(t, 10*time.Second, "r1 to spill 250000 bytes", func() bool {
		return r1.Stdout().Len() == 250_000 && r1.Stdout().SpillPath() != "" && sup.SpillBytes() == 250_000
	})
	r1Path := r1.Stdout().SpillPath()

	r3 := spawn(t, sup, zeros([]int{30_000, 100_000, 100_000}, gate("r3a"), gate("r3b")))
	proctest.WaitFor(t, 10*time.Second, "r3 to spill 30000 bytes", func() bool {
		return r3.Stdout().Len() == 30_000 && r3.Stdout().SpillPath() != "" && sup.SpillBytes() == 280_000
	})
	r3Path := r3.Stdout().SpillPath()
	open("r3a") // 100000 more bytes do not fit, and nothing finished can be freed
	proctest.WaitFor(t, 10*time.Second, "r3 to lose its spill file", func() bool {
		return r3.Stdout().Len() == 130_000 && r3.Stdout().SpillPath() == ""
	})
	if r3.State() != proc.Running {
		t.Fatalf("r3 state %v", r3.State())
	}
	checkWithdrawn(t, "r3", r3, r3Path)
	if c := r3.Stdout().Since(0); !c.Lossy || c.Next != 130_000 || len(c.Data) != 1000 {
		t.Errorf("lossy read of r3: lossy %v next %d, %d bytes", c.Lossy, c.Next, len(c.Data))
	}
	checkKept(t, "r1 (running)", r1, r1Path, 250_000)
	checkAccounting(t, sup, 250_000)

	// r1 finishes; r3 writes on with room to spare: it does not spill again.
	open("r1")
	proctest.AwaitExit(t, r1, 10*time.Second)
	open("r3b")
	proctest.AwaitExit(t, r3, 10*time.Second)
	out := r3.Stdout().Output()
	if out.SpillPath != "" || !out.Truncated || out.Bytes != 230_000 || out.Text != strings.Repeat("\x00", 1000) {
		t.Errorf("r3 output: spill %q truncated %v bytes %d tail %d bytes", out.SpillPath, out.Truncated, out.Bytes, len(out.Text))
	}
	checkKept(t, "r1 (finished)", r1, r1Path, 250_000)
	checkAccounting(t, sup, 250_000)
	if got := proctest.SpillFiles(t, sup.SpillDir()); len(got) != 1 || got[0] != r1Path {
		t.Errorf("spill dir holds %q, want only %s", got, r1Path)
	}

	// A stream bigger than the budget: the finished file goes first, then the stream
	// itself stops spilling. Nothing is left.
	r4 := spawn(t, sup, zeros([]int{400_000}))
	proctest.AwaitExit(t, r4, 10*time.Second)
	if out := r4.Stdout().Output(); out.SpillPath != "" || !out.Truncated || out.Bytes != 400_000 || len(out.Text) != 1000 {
		t.Errorf("r4 (bigger than the budget) output: spill %q truncated %v bytes %d", out.SpillPath, out.Truncated, out.Bytes)
	}
	checkWithdrawn(t, "r1", r1, r1Path)
	checkAccounting(t, sup, 0)
	if got := proctest.SpillFiles(t, sup.SpillDir()); len(got) != 0 {
		t.Errorf("spill dir holds %q, want nothing", got)
	}
}

// Many streams spilling at once never make the spill directory pass the budget, and
// afterwards every reported path is a complete file and every file is reported.
func TestSpillBudgetIsNeverExceeded(t *testing.T) {
	proctest.NoLeftovers(t)
	const budget = 400_000
	sup := budgetSup(t, t.TempDir(), budget)
	var procs []*subprocess.Process
	samples := 0
	for round := 0; round < 3; round++ {
		var batch []*subprocess.Process
		for i, bs := range []int{512, 4096, 70_000, 1} {
			n := 60_000 + 30_000*i
			if bs == 1 {
				n = 5000 // byte-sized writes are slow
			}
			spec := bashSpec(fmt.Sprintf("head -c %d /dev/zero | dd bs=%d 2>/dev/null; head -c %d /dev/zero >&2", n, bs, n/2))
			spec.Stdout, spec.Stderr = spillCapture, spillCapture
			batch = append(batch, spawn(t, sup, spec))
		}
		deadline := time.Now().Add(30 * time.Second)
		for polls := 0; ; polls++ {
			if used := sup.SpillBytes(); used > budget {
				t.Fatalf("round %d poll %d: SpillBytes %d, budget %d", round, polls, used, budget)
			}
			if disk, ok := proctest.DiskSample(t, sup.SpillDir()); ok && disk > budget {
				t.Fatalf("round %d poll %d: %d bytes on disk, budget %d", round, polls, disk, budget)
			} else if ok {
				samples++
			}
			done := true
			for _, p := range batch {
				if p.State() == proc.Running {
					done = false
				}
			}
			if done {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: processes still running after 30s", round)
			}
			time.Sleep(time.Millisecond) // polling interval, not synchronisation
		}
		procs = append(procs, batch...)
		checkAccounting(t, sup, proctest.DiskUsage(t, sup.SpillDir())) // quiet now: exact
	}
	t.Logf("%d disk samples during the runs", samples)
	var reported []string
	var sum int64
	lost := 0
	for _, p := range procs {
		for _, s := range []*proc.Stream{p.Stdout(), p.Stderr()} {
			out := s.Output()
			if out.SpillPath == "" {
				lost++ // every stream here overflows its tail: its file was deleted
				continue
			}
			reported = append(reported, out.SpillPath)
			fi, err := os.Stat(out.SpillPath)
			if err != nil || fi.Size() != out.Bytes {
				t.Errorf("reported spill %s: %v, want %d bytes", out.SpillPath, err, out.Bytes)
			}
			sum += out.Bytes
		}
	}
	if got := proctest.SpillFiles(t, sup.SpillDir()); fmt.Sprint(got) != fmt.Sprint(sortStrings(reported)) {
		t.Errorf("spill dir holds %q, reported %q", got, reported)
	}
	if len(reported) == 0 || lost == 0 {
		t.Errorf("%d streams kept a spill file, %d lost it; want the budget to bite", len(reported), lost)
	}
	checkAccounting(t, sup, sum)
}

// Readers of a finished process race the deletion of its file: once they see no path,
// they never see it again, and after the deletion nobody does.
func TestSpillBudgetDeletionIsSafeForReaders(t *testing.T) {
	proctest.NoLeftovers(t)
	sup := budgetSup(t, t.TempDir(), 150_000)
	a := spillOf(t, sup, 100_000)
	path := a.Stdout().SpillPath()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			withdrawn := false
			for {
				var got string
				switch i % 2 {
				case 0:
					got = a.Stdout().Output().SpillPath
				default:
					a.Stdout().Since(0)
					got = a.Stdout().SpillPath()
				}
				switch {
				case got == "":
					withdrawn = true
				case withdrawn || got != path:
					errs <- fmt.Sprintf("reader %d saw %q after the path was withdrawn", i, got)
					return
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	b := spillOf(t, sup, 100_000)
	close(stop)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	checkWithdrawn(t, "A", a, path)
	checkKept(t, "B", b, b.Stdout().SpillPath(), 100_000)
	checkAccounting(t, sup, 100_000)
}

// Closing the Supervisor removes the spill directory and withdraws every path.
func TestSpillPathsWithdrawnOnClose(t *testing.T) {
	proctest.NoLeftovers(t)
	sup := budgetSup(t, t.TempDir(), 1<<20)
	a := spillOf(t, sup, 100_000)
	path := a.Stdout().SpillPath()
	sup.Close()
	checkWithdrawn(t, "A", a, path)
	if sup.SpillBytes() != 0 {
		t.Errorf("SpillBytes after Close: %d", sup.SpillBytes())
	}
}

func TestSpillBudgetDefaults(t *testing.T) {
	if proc.DefaultSpillBudgetBytes != 1073741824 {
		t.Errorf("DefaultSpillBudgetBytes %d", proc.DefaultSpillBudgetBytes)
	}
	for _, b := range []int64{0, -5} {
		s := subprocess.New(subprocess.Options{DisableCgroups: true, SpillBudgetBytes: b})
		if s.SpillBudget() != 1073741824 || s.SpillBytes() != 0 {
			t.Errorf("Options.SpillBudgetBytes %d: budget %d, used %d", b, s.SpillBudget(), s.SpillBytes())
		}
		s.Close()
	}
}

func TestPluginSpillBudgetConfig(t *testing.T) {
	proctest.NoLeftovers(t)
	for _, c := range []struct {
		config map[string]any
		want   int64
	}{
		{nil, 1073741824},
		{map[string]any{"spillBudgetBytes": 12345}, 12345},
	} {
		rt := newRuntime(t)
		if err := rt.Compose("test", []container.Row{{ID: "subprocess", Plugin: "subprocess", Config: c.config}}); err != nil {
			t.Fatal(err)
		}
		v, _ := container.Lookup(rt, subprocess.Service)
		if sup := v; sup.SpillBudget() != c.want {
			t.Errorf("config %v: budget %d, want %d", c.config, sup.SpillBudget(), c.want)
		}
	}
	for _, c := range []struct {
		value any
		want  string
	}{
		{0, "subprocess: spillBudgetBytes must be a positive integer, got 0"},
		{-1, "subprocess: spillBudgetBytes must be a positive integer, got -1"},
		{1.5, `config: key "spillBudgetBytes": expected an integer, got the number 1.5`},
		{"1G", `config: key "spillBudgetBytes": expected an integer, got the string "1G"`},
	} {
		rt := newRuntime(t)
		err := rt.Compose("test", []container.Row{{ID: "subprocess", Plugin: "subprocess", Config: map[string]any{"spillBudgetBytes": c.value}}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("spillBudgetBytes %v: Compose error %v; want %q", c.value, err, c.want)
		}
	}
	rt := newRuntime(t)
	if err := rt.Validate([]container.Row{{ID: "subprocess", Plugin: "subprocess", Config: map[string]any{"spillBudgetBytes": 0}}}); err == nil ||
		err.Error() != `row "subprocess": subprocess: spillBudgetBytes must be a positive integer, got 0` {
		t.Errorf("Validate of a zero budget: %v", err)
	}
}
