package main_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proctest"
)

// The serving path, measured end to end: the built dsh binary over stdio, driven with raw
// JSON-RPC lines, each call paired with its floor — a raw os/exec of the same bash
// command — in the same iteration, so load from other processes affects both alike:
//
//	go test -run '^$' -bench Serve -benchmem ./cmd/dsh/

// stdioPeer is a `dsh serve` driven with raw JSON-RPC lines.
type stdioPeer struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	id  int
}

func startPeer(b *testing.B) *stdioPeer {
	b.Helper()
	args := []string{"serve", "--workspace", b.TempDir(), "--log-level", "warn"}
	if p := os.Getenv("DSH_BENCH_PROFILE"); p != "" {
		args = append(args, "--profile", p)
	}
	cmd := exec.Command(dshBin, args...)
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
	return p
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

// BenchmarkServeTrue: a tools/call of `true` through `dsh serve` over stdio vs a raw
// os/exec of `bash -c true`, paired; reports both medians and their ratio.
func BenchmarkServeTrue(b *testing.B) {
	p := startPeer(b)
	proctest.PairedWithTrue(b, "serve", func() {
		if res := p.bash(b, "true"); !bytes.Contains(res, []byte(`"text":"(no output)"`)) {
			b.Fatalf("%s", res)
		}
	})
}

const gigabyte = 1_000_000_000

// BenchmarkServeOutput1GB: a tools/call whose command writes 1 GB (kept: the 64 kB tail
// and the capped spill file) through `dsh serve` over stdio vs a raw pipe read of the
// same command into io.Discard, paired; reports the time ratio.
func BenchmarkServeOutput1GB(b *testing.B) {
	const command = "head -c 1000000000 /dev/zero"
	p := startPeer(b)
	var dsh, raw []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if res := p.bash(b, command); !bytes.Contains(res, []byte(`"truncated":true`)) {
			b.Fatalf("%.300s", res)
		}
		t1 := time.Now()
		if n := proctest.RawRead(b, command); n != gigabyte {
			b.Fatal(n)
		}
		t2 := time.Now()
		dsh = append(dsh, t1.Sub(t0))
		raw = append(raw, t2.Sub(t1))
	}
	d, r := proctest.Median(dsh), proctest.Median(raw)
	b.ReportMetric(gigabyte/d.Seconds()/1e6, "serve-MB/s")
	b.ReportMetric(gigabyte/r.Seconds()/1e6, "raw-MB/s")
	b.ReportMetric(float64(d)/float64(r), "serve/raw")
}
