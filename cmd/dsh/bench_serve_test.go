package main_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
)

// The serving path, measured end to end: the built dsh binary over stdio, driven with raw
// JSON-RPC lines, each call paired with its floor — a raw os/exec of the same bash
// command — in the same iteration, so load from other processes affects both alike:
//
//	go test -run '^$' -bench Serve -benchmem ./cmd/dsh/
//
// An A/B of two binaries (a change against the binary before it, or a build with and
// without a tuning knob) drives both in the same iterations, taking turns at going
// first, each iteration ending with the raw floor:
//
//	DSH_BENCH_BIN=./dsh-a DSH_BENCH_VS=./dsh-b go test -run '^$' -bench Serve ./cmd/dsh/
//
// DSH_BENCH_BIN replaces the binary built for the tests; DSH_BENCH_VS adds the second
// one, whose figures are reported as vs-… beside the first's, with serve/vs the ratio
// of the two medians. DSH_BENCH_JOBS=N starts N background jobs in each server first.

// stdioPeer is a `dsh serve` driven with raw JSON-RPC lines.
type stdioPeer struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	id  int
}

func startPeer(b *testing.B, bin string) *stdioPeer {
	b.Helper()
	args := []string{"serve", "--workspace", b.TempDir(), "--log-level", "warn"}
	if p := os.Getenv("DSH_BENCH_PROFILE"); p != "" {
		args = append(args, "--profile", p)
	}
	cmd := exec.Command(bin, args...)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &stdioPeer{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	b.Cleanup(func() {
		in.Close()
		cmd.Wait()
	})
	p.roundTrip(b, `"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`)
	fmt.Fprintln(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	p.startJobs(b)
	return p
}

// startJobs starts $DSH_BENCH_JOBS background jobs (`sleep 3600`, until the peer ends)
// before the measured calls, for a server whose goroutines are not only its own.
func (p *stdioPeer) startJobs(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("DSH_BENCH_JOBS"))
	for range n {
		res := p.roundTrip(b, `"method":"tools/call","params":{"name":"bash","arguments":{"command":"sleep 3600","description":"Benchmark","run_in_background":true}}`)
		if bytes.Contains(res, []byte(`"isError":true`)) {
			b.Fatalf("background job: %s", res)
		}
	}
}

// roundTrip sends one request (its JSON after the id) and returns its response line.
func (p *stdioPeer) roundTrip(b *testing.B, rest string) []byte {
	p.id++
	id := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,`, p.id)
	if _, err := io.WriteString(p.in, id+rest+"}\n"); err != nil {
		b.Fatal(err)
	}
	for {
		line, err := p.out.ReadBytes('\n')
		if err != nil {
			b.Fatal(err)
		}
		if bytes.HasPrefix(line, []byte(id)) {
			return line
		}
	}
}

func (p *stdioPeer) bash(b *testing.B, command string) []byte {
	return p.roundTrip(b, `"method":"tools/call","params":{"name":"bash","arguments":{"command":"`+command+`","description":"Benchmark"}}`)
}

// benchBin is the binary the serve benchmarks drive: $DSH_BENCH_BIN, else the one built
// for these tests.
func benchBin() string {
	if bin := os.Getenv("DSH_BENCH_BIN"); bin != "" {
		return bin
	}
	return dshBin
}

// BenchmarkServeTrue: a tools/call of `true` through `dsh serve` over stdio vs a raw
// os/exec of `bash -c true`, paired; reports both medians and their ratio.
func BenchmarkServeTrue(b *testing.B) {
	p := startPeer(b, benchBin())
	call := func(p *stdioPeer) func() {
		return func() {
			if res := p.bash(b, "true"); !bytes.Contains(res, []byte(`"text":"(no output)"`)) {
				b.Fatalf("%s", res)
			}
		}
	}
	if vs := os.Getenv("DSH_BENCH_VS"); vs != "" {
		q := startPeer(b, vs)
		reportAB(b, "", alternate(b, call(p), call(q), rawTrue(b)))
		return
	}
	proctest.PairedWithTrue(b, "serve", call(p))
}

const gigabyte = 1_000_000_000

// BenchmarkServeOutput1GB: a tools/call whose command writes 1 GB (kept: the 64 kB tail
// and the capped spill file) through `dsh serve` over stdio vs a raw pipe read of the
// same command into io.Discard, paired; reports the time ratio.
func BenchmarkServeOutput1GB(b *testing.B) {
	const command = "head -c 1000000000 /dev/zero"
	call := func(p *stdioPeer) func() {
		return func() {
			if res := p.bash(b, command); !bytes.Contains(res, []byte(`"truncated":true`)) {
				b.Fatalf("%.300s", res)
			}
		}
	}
	raw := func() {
		cmd := exec.Command("bash", "-c", command)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, out); err != nil || n != gigabyte {
			b.Fatal(n, err)
		}
		cmd.Wait()
	}
	p := startPeer(b, benchBin())
	if vs := os.Getenv("DSH_BENCH_VS"); vs != "" {
		q := startPeer(b, vs)
		reportAB(b, "1GB-", alternate(b, call(p), call(q), raw))
		return
	}
	var dsh, floor []time.Duration
	for b.Loop() {
		t0 := time.Now()
		call(p)()
		t1 := time.Now()
		raw()
		t2 := time.Now()
		dsh = append(dsh, t1.Sub(t0))
		floor = append(floor, t2.Sub(t1))
	}
	d, r := proctest.Median(dsh), proctest.Median(floor)
	b.ReportMetric(gigabyte/d.Seconds()/1e6, "serve-MB/s")
	b.ReportMetric(gigabyte/r.Seconds()/1e6, "raw-MB/s")
	b.ReportMetric(float64(d)/float64(r), "serve/raw")
}

// rawTrue is the floor of a call of `true`: a raw os/exec of `bash -c true`, its output
// read into memory (as proctest.PairedWithTrue runs it).
func rawTrue(b *testing.B) func() {
	return func() {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command("bash", "-c", "true")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// alternate runs a, b and then floor once per iteration, a first in even iterations
// and b first in odd ones, so that each of the two follows the floor (a raw exec, after
// which a server wakes from idle) as often as the other, and returns the durations of
// each: [a, b, floor].
func alternate(b *testing.B, runA, runB, floor func()) [][]time.Duration {
	times := make([][]time.Duration, 3)
	timed := func(k int, run func()) {
		t0 := time.Now()
		run()
		times[k] = append(times[k], time.Since(t0))
	}
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			timed(0, runA)
			timed(1, runB)
		} else {
			timed(1, runB)
			timed(0, runA)
		}
		timed(2, floor)
	}
	return times
}

// reportAB reports the medians of an A/B (A = DSH_BENCH_BIN or the built binary, B =
// DSH_BENCH_VS) and their floor, and the ratios: serve/raw, vs/raw, serve/vs, and
// serve/vs-paired, the median of each iteration's own A/B ratio (the two ran moments
// apart, so it drifts least with the machine's load).
func reportAB(b *testing.B, prefix string, times [][]time.Duration) {
	a, vs, raw := proctest.Median(times[0]), proctest.Median(times[1]), proctest.Median(times[2])
	b.ReportMetric(pairedRatio(times[0], times[1]), prefix+"serve/vs-paired")
	b.ReportMetric(float64(a.Nanoseconds()), prefix+"serve-median-ns")
	b.ReportMetric(float64(vs.Nanoseconds()), prefix+"vs-median-ns")
	b.ReportMetric(float64(raw.Nanoseconds()), prefix+"raw-median-ns")
	b.ReportMetric(float64(a)/float64(raw), prefix+"serve/raw")
	b.ReportMetric(float64(vs)/float64(raw), prefix+"vs/raw")
	b.ReportMetric(float64(a)/float64(vs), prefix+"serve/vs")
}

// pairedRatio is the median of a[i]/b[i] (the upper one of an even count).
func pairedRatio(a, b []time.Duration) float64 {
	r := make([]float64, len(a))
	for i := range a {
		r[i] = float64(a[i]) / float64(b[i])
	}
	slices.Sort(r)
	return r[len(r)/2]
}

// BenchmarkServeColdStart: a fresh `dsh serve` per iteration, from its exec to the
// answer of initialize (init-ms) and to the result of a first tools/call of `true`
// (first-ms), medians. With DSH_BENCH_VS the two binaries start in turns, A first in
// even iterations, and their medians are reported side by side; DSH_BENCH_PROFILE
// chooses the profile (e.g. sandbox):
//
//	DSH_BENCH_VS=./dsh-before go test -run '^$' -bench ServeColdStart -benchtime 40x ./cmd/dsh/
func BenchmarkServeColdStart(b *testing.B) {
	bins := []string{benchBin()}
	if vs := os.Getenv("DSH_BENCH_VS"); vs != "" {
		bins = append(bins, vs)
	}
	initT := make([][]time.Duration, len(bins))
	firstT := make([][]time.Duration, len(bins))
	for i := 0; b.Loop(); i++ {
		for k := range bins {
			k := (k + i) % len(bins)
			ti, tf := coldStart(b, bins[k])
			initT[k] = append(initT[k], ti)
			firstT[k] = append(firstT[k], tf)
		}
	}
	names := []string{"", "vs-"}
	for k := range bins {
		b.ReportMetric(float64(proctest.Median(initT[k]).Microseconds())/1000, names[k]+"init-ms")
		b.ReportMetric(float64(proctest.Median(firstT[k]).Microseconds())/1000, names[k]+"first-ms")
	}
}

// coldStart starts bin's `dsh serve`, times its initialize answer and its first
// tools/call result from the exec, and ends it (untimed).
func coldStart(b *testing.B, bin string) (initDone, firstDone time.Duration) {
	b.Helper()
	args := []string{"serve", "--workspace", b.TempDir(), "--log-level", "warn"}
	if p := os.Getenv("DSH_BENCH_PROFILE"); p != "" {
		args = append(args, "--profile", p)
	}
	cmd := exec.Command(bin, args...)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	r := bufio.NewReader(out)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	defer in.Close()
	expect := func(prefix string) {
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				b.Fatalf("%s: %v", bin, err)
			}
			if bytes.HasPrefix(line, []byte(prefix)) {
				return
			}
		}
	}
	io.WriteString(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`+"\n")
	expect(`{"jsonrpc":"2.0","id":1,`)
	initDone = time.Since(start)
	io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"true","description":"Benchmark"}}}`+"\n")
	expect(`{"jsonrpc":"2.0","id":2,`)
	return initDone, time.Since(start)
}
