package subprocess_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/plugins/subprocess"
	"github.com/dsh-dev/dsh/proc"
)

func TestCaptureKeepsTailAndSpillsWholeStream(t *testing.T) {
	proctest.NoLeftovers(t)
	sup := newSup(t, false)
	want := proctest.SeqOutput(20000) // 108894 bytes

	t.Run("fits in memory", func(t *testing.T) {
		spec := bashSpec("seq 1 20000")
		spec.Stdout = proc.Capture{MaxBytes: int64(len(want)), SpillMaxBytes: 1 << 20}
		p := spawn(t, sup, spec)
		proctest.AwaitExit(t, p, 10*time.Second)
		out := p.Stdout().Output()
		if out.Text != want || out.Truncated || out.SpillPath != "" || out.Bytes != int64(len(want)) {
			t.Errorf("output: truncated %v spill %q bytes %d, text ok %v", out.Truncated, out.SpillPath, out.Bytes, out.Text == want)
		}
	})
	t.Run("one byte over spills", func(t *testing.T) {
		spec := bashSpec("seq 1 20000")
		spec.Stdout = proc.Capture{MaxBytes: int64(len(want)) - 1, SpillMaxBytes: 1 << 20}
		p := spawn(t, sup, spec)
		proctest.AwaitExit(t, p, 10*time.Second)
		out := p.Stdout().Output()
		if out.Text != want[1:] || !out.Truncated || out.SpillPath == "" {
			t.Fatalf("output: truncated %v spill %q", out.Truncated, out.SpillPath)
		}
		data, err := os.ReadFile(out.SpillPath)
		if err != nil || string(data) != want {
			t.Errorf("spill file: %d bytes, err %v; want the whole stream", len(data), err)
		}
	})
	t.Run("tail and spill", func(t *testing.T) {
		spec := bashSpec("seq 1 20000; echo oops >&2")
		spec.Stdout = proc.Capture{MaxBytes: 1000, SpillMaxBytes: 1 << 20}
		p := spawn(t, sup, spec)
		proctest.AwaitExit(t, p, 10*time.Second)
		out := p.Stdout().Output()
		if out.Text != want[len(want)-1000:] || !out.Truncated || out.Bytes != int64(len(want)) {
			t.Errorf("tail wrong: truncated %v bytes %d text %q", out.Truncated, out.Bytes, out.Text[:20])
		}
		if errOut := p.Stderr().Output(); errOut.Text != "oops\n" || errOut.Truncated || errOut.SpillPath != "" {
			t.Errorf("stderr %+v", errOut)
		}
		data, err := os.ReadFile(out.SpillPath)
		if err != nil || string(data) != want {
			t.Fatalf("spill file: %d bytes, err %v", len(data), err)
		}
		fi, _ := os.Stat(out.SpillPath)
		di, _ := os.Stat(filepath.Dir(out.SpillPath))
		if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
			t.Errorf("modes: file %v dir %v", fi.Mode().Perm(), di.Mode().Perm())
		}
		if filepath.Dir(out.SpillPath) != filepath.Join(sup.SpillDir(), "no-session") {
			t.Errorf("spill %s outside SpillDir %s/no-session", out.SpillPath, sup.SpillDir())
		}
	})
	t.Run("past the spill cap", func(t *testing.T) {
		own := newSup(t, false)
		spec := bashSpec("seq 1 20000")
		spec.Stdout = proc.Capture{MaxBytes: 1000, SpillMaxBytes: 50000}
		p := spawn(t, own, spec)
		proctest.AwaitExit(t, p, 10*time.Second)
		out := p.Stdout().Output()
		if out.Text != want[len(want)-1000:] || !out.Truncated || out.SpillPath != "" {
			t.Errorf("output: truncated %v spill %q", out.Truncated, out.SpillPath)
		}
		// The first read may already pass the cap (then no file is ever made); either
		// way no spill file may remain.
		if dir := own.SpillDir(); dir != "" {
			if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
				t.Errorf("spill dir after passing the cap: %v %v; want it empty", entries, err)
			}
		}
	})
	t.Run("spilling disabled", func(t *testing.T) {
		spec := bashSpec("seq 1 20000")
		spec.Stdout = proc.Capture{MaxBytes: 1000}
		p := spawn(t, sup, spec)
		proctest.AwaitExit(t, p, 10*time.Second)
		if out := p.Stdout().Output(); out.Text != want[len(want)-1000:] || !out.Truncated || out.SpillPath != "" {
			t.Errorf("output: truncated %v spill %q", out.Truncated, out.SpillPath)
		}
	})
	dir := sup.SpillDir()
	if dir == "" {
		t.Fatal("no spill directory was made")
	}
	sup.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("spill dir %s not removed by Close: %v", dir, err)
	}
}

// Two supervisors (two harnesses) never share a spill directory or a file name.
func TestSpillDirsAreUniquePerSupervisor(t *testing.T) {
	proctest.NoLeftovers(t)
	root := t.TempDir()
	var paths []string
	for i := 0; i < 2; i++ {
		sup := subprocess.New(subprocess.Options{SpillRoot: root})
		defer sup.Close()
		spec := bashSpec("seq 1 2000")
		spec.Stdout = proc.Capture{MaxBytes: 10, SpillMaxBytes: 1 << 20}
		p := spawn(t, sup, spec)
		proctest.AwaitExit(t, p, 10*time.Second)
		paths = append(paths, p.Stdout().Output().SpillPath)
	}
	if paths[0] == "" || filepath.Dir(paths[0]) == filepath.Dir(paths[1]) {
		t.Errorf("spill paths %q share a directory", paths)
	}
}

func TestSinceIsOffsetBasedAndLossyBeforeTheWindow(t *testing.T) {
	proctest.NoLeftovers(t)
	sup := newSup(t, false)
	gate := filepath.Join(t.TempDir(), "go")
	p := spawn(t, sup, bashSpec(`echo first; while [ ! -e `+gate+` ]; do sleep 0.01; done; echo second`))
	waitOutput(t, p, "first\n")
	c := p.Stdout().Since(0)
	if string(c.Data) != "first\n" || c.Next != 6 || c.Lossy {
		t.Errorf("first read %+v", c)
	}
	if c := p.Stdout().Since(6); len(c.Data) != 0 || c.Next != 6 {
		t.Errorf("read with nothing new %+v", c)
	}
	os.WriteFile(gate, nil, 0o600)
	proctest.AwaitExit(t, p, 10*time.Second)
	if c := p.Stdout().Since(6); string(c.Data) != "second\n" || c.Next != 13 || c.Lossy {
		t.Errorf("second read %+v", c)
	}
	if c := p.Stdout().Since(13); len(c.Data) != 0 || c.Next != 13 || c.Lossy {
		t.Errorf("third read %+v", c)
	}

	spec := bashSpec("printf 0123456789ABCDEF")
	spec.Stdout = proc.Capture{MaxBytes: 8}
	p = spawn(t, sup, spec)
	proctest.AwaitExit(t, p, 10*time.Second)
	if c := p.Stdout().Since(0); string(c.Data) != "89ABCDEF" || c.Next != 16 || !c.Lossy {
		t.Errorf("lossy read %+v", c)
	}
	if c := p.Stdout().Since(10); string(c.Data) != "ABCDEF" || c.Lossy {
		t.Errorf("read inside the window %+v", c)
	}
}

// The ring keeps exactly the last MaxBytes bytes whatever the write sizes.
func TestRingTailAcrossWriteSizes(t *testing.T) {
	proctest.NoLeftovers(t)
	sup := newSup(t, false)
	for _, max := range []int64{1, 7, 4096, 65536, 100000} {
		for _, chunk := range []int{1, 3, 5000, 70000} {
			t.Run(fmt.Sprintf("max%d/chunk%d", max, chunk), func(t *testing.T) {
				// Python-free deterministic stream: `seq` piped through dd for chunked writes.
				n := 40000
				if chunk < 10 {
					n = 3000 // byte-sized writes are slow; a shorter stream still wraps the ring
				}
				script := fmt.Sprintf("seq 1 %d | dd bs=%d 2>/dev/null", n, chunk)
				spec := bashSpec(script)
				spec.Stdout = proc.Capture{MaxBytes: max}
				p := spawn(t, sup, spec)
				proctest.AwaitExit(t, p, 10*time.Second)
				want := []byte(proctest.SeqOutput(n))
				out := p.Stdout().Output()
				tail := want[max64(0, int64(len(want))-max):]
				if !bytes.Equal([]byte(out.Text), tail) || out.Truncated != (int64(len(want)) > max) {
					t.Errorf("tail mismatch: got %d bytes truncated=%v", len(out.Text), out.Truncated)
				}
				c := p.Stdout().Since(int64(len(want)) - int64(len(tail)))
				if !bytes.Equal(c.Data, tail) || c.Lossy {
					t.Errorf("Since mismatch")
				}
			})
		}
	}
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// A spill directory left by a harness that died (its pid is gone) is removed by the next
// one; a live harness's directory is not touched.
func TestStaleSpillDirsAreRemoved(t *testing.T) {
	proctest.NoLeftovers(t)
	root := t.TempDir()
	dead := filepath.Join(root, fmt.Sprintf("dsh-spill-%d-123", deadPid(t)))
	live := filepath.Join(root, fmt.Sprintf("dsh-spill-%d-456", os.Getppid()))
	other := filepath.Join(root, "unrelated")
	for _, d := range []string{dead, live, other} {
		os.MkdirAll(d, 0o700)
		os.WriteFile(filepath.Join(d, "1-stdout.log"), []byte("x"), 0o600)
	}
	sup := subprocess.New(subprocess.Options{SpillRoot: root})
	defer sup.Close()
	spec := bashSpec("seq 1 2000")
	spec.Stdout = proc.Capture{MaxBytes: 10, SpillMaxBytes: 1 << 20}
	proctest.AwaitExit(t, spawn(t, sup, spec), 10*time.Second)
	if !proctest.Until(10*time.Second, func() bool { _, err := os.Stat(dead); return os.IsNotExist(err) }) {
		t.Errorf("stale spill dir kept: %s", dead)
	}
	for _, d := range []string{live, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s removed: %v", d, err)
		}
	}
}

// Streams written in big blocks go bulk (larger reads, a larger pipe) after their first
// megabyte; every byte still reaches the spill file and the tail, on both streams at once.
func TestBulkStreamsKeepEveryByte(t *testing.T) {
	proctest.NoLeftovers(t)
	sup := newSup(t, false)
	const lines = 1500000
	want := proctest.SeqOutput(lines) // 10.4 MB
	block := fmt.Sprintf("seq 1 %d | dd bs=1M iflag=fullblock status=none", lines)
	spec := bashSpec(block + " & " + block + " >&2; wait")
	capture := proc.Capture{MaxBytes: 64000, SpillMaxBytes: 64 << 20}
	spec.Stdout, spec.Stderr = capture, capture
	p := spawn(t, sup, spec)
	if exit := proctest.AwaitExit(t, p, 60*time.Second); exit.Code == nil || *exit.Code != 0 {
		t.Fatalf("exit %+v", exit)
	}
	for name, s := range map[string]*proc.Stream{"stdout": p.Stdout(), "stderr": p.Stderr()} {
		out := s.Output()
		if out.Bytes != int64(len(want)) || out.Text != want[len(want)-64000:] || !out.Truncated {
			t.Errorf("%s: %d bytes, truncated %v, tail ok %v", name, out.Bytes, out.Truncated, out.Text == want[len(want)-64000:])
		}
		data, err := os.ReadFile(out.SpillPath)
		if err != nil || string(data) != want {
			t.Errorf("%s spill file: %d bytes, err %v; want the whole stream (%d bytes)", name, len(data), err, len(want))
		}
	}
}

// While the command runs, a reported spill file holds everything captured so far, though
// the stream writes its file in blocks: the small writes since the last block are
// written out before the path is given.
func TestSpillFileIsCurrentWhenReported(t *testing.T) {
	proctest.NoLeftovers(t)
	sup := newSup(t, false)
	want := proctest.SeqOutput(20000) // 108894 bytes, in small writes
	gate := filepath.Join(t.TempDir(), "gate")
	spec := bashSpec(fmt.Sprintf("seq 1 20000; while [ ! -e %s ]; do sleep 0.01; done", gate))
	spec.Stdout = proc.Capture{MaxBytes: 1000, SpillMaxBytes: 1 << 20}
	p := spawn(t, sup, spec)
	proctest.WaitFor(t, 10*time.Second, "the output", func() bool { return p.Stdout().Len() == int64(len(want)) })
	for name, path := range map[string]func() string{
		"SpillPath": p.Stdout().SpillPath,
		"Output":    func() string { return p.Stdout().Output().SpillPath },
	} {
		data, err := os.ReadFile(path())
		if err != nil || string(data) != want {
			t.Errorf("%s: the spill file has %d bytes (err %v); want the %d captured so far", name, len(data), err, len(want))
		}
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	proctest.AwaitExit(t, p, 10*time.Second)
}

// The same attack as a command would make it: a command of the Supervisor replaces the
// spill directory with a symlink; the next command's spill is not written through it.
func TestSupervisorSpillSurvivesACommandSwappingTheDirectory(t *testing.T) {
	proctest.NoLeftovers(t)
	logs := &proctest.Buffer{}
	sup := subprocess.New(subprocess.Options{DisableCgroups: true, SpillRoot: t.TempDir(), Logger: logs.Logger()})
	t.Cleanup(sup.Close)
	spillOf(t, sup, 5000)
	dir := sup.SpillDir()
	target := t.TempDir()
	swap := bashSpec(`mv "$D" "$D.moved" && ln -s "$T" "$D"`)
	swap.Env = map[string]string{"D": dir, "T": target}
	swapper := spawn(t, sup, swap)
	if ex := proctest.AwaitExit(t, swapper, 10*time.Second); proctest.Code(ex) != 0 {
		t.Fatalf("swap: %+v %s", ex, swapper.Stderr().Output().Text)
	}
	p := spawn(t, sup, zeros([]int{5000}))
	proctest.AwaitExit(t, p, 10*time.Second)
	if out := p.Stdout().Output(); out.SpillPath != "" || !out.Truncated || out.Bytes != 5000 {
		t.Errorf("after the swap: %+v", out.SpillPath)
	}
	if entries, _ := os.ReadDir(target); len(entries) != 0 {
		t.Errorf("the Supervisor wrote through the symlink: %v", entries)
	}
	if !strings.Contains(logs.String(), "the spill directory was moved or replaced") {
		t.Errorf("no warning; logs:\n%s", logs)
	}
	sup.Close()
	os.Remove(dir)
	os.RemoveAll(dir + ".moved")
}
