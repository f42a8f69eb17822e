package main_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/otlptest"
	"github.com/dsh-dev/dsh/internal/proctest"
)

// What the observers of a call cost, measured end to end in one run: a tools/call of
// `true` through `dsh serve` over stdio with nothing observing it, with the session-log
// row, with traces exported to an OTLP receiver, and with one PreToolUse hook (`exit
// 0`), each iteration running all four (in a rotating order) and a raw os/exec of
// `bash -c true`:
//
//	go test -run '^$' -bench ServeObservers ./cmd/dsh/
//
// log/off and trace/off are the ratios of the medians, each also paired per iteration;
// hook-extra-ns is what the hook adds to a call, beside raw-median-ns, one process
// spawn.
func BenchmarkServeObservers(b *testing.B) {
	dir := b.TempDir()
	profile := func(name, rows string) string {
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte("extends: default\nplugins:\n"+rows), 0o644); err != nil {
			b.Fatal(err)
		}
		return path
	}
	recv := otlptest.Start()
	b.Cleanup(recv.Close)
	home := []string{"DSH_HOME=" + b.TempDir()}
	peers := []*stdioPeer{
		startPeerWith(b, nil, home),
		startPeerWith(b, []string{"--profile", profile("log", "  - id: session-log\n    name: session-log\n")}, home),
		startPeerWith(b, nil, append(home, "OTEL_EXPORTER_OTLP_ENDPOINT="+recv.Endpoint())),
		startPeerWith(b, []string{"--profile", profile("hook", "  - id: hooks\n    name: hooks\n    config:\n      preToolUse:\n        - command: exit 0\n")}, home),
	}
	times := make([][]time.Duration, len(peers)+1)
	for i := 0; b.Loop(); i++ {
		for k := range peers {
			p := peers[(i+k)%len(peers)]
			t0 := time.Now()
			if res := p.bash(b, "true"); !bytes.Contains(res, []byte(`"text":"(no output)"`)) {
				b.Fatalf("%s", res)
			}
			times[(i+k)%len(peers)] = append(times[(i+k)%len(peers)], time.Since(t0))
		}
		t0 := time.Now()
		rawTrue(b)()
		times[len(peers)] = append(times[len(peers)], time.Since(t0))
	}
	off, log, trace, hook, raw := proctest.Median(times[0]), proctest.Median(times[1]), proctest.Median(times[2]), proctest.Median(times[3]), proctest.Median(times[4])
	b.ReportMetric(float64(off.Nanoseconds()), "off-median-ns")
	b.ReportMetric(float64(log)/float64(off), "log/off")
	b.ReportMetric(pairedRatio(times[1], times[0]), "log/off-paired")
	b.ReportMetric(float64(trace)/float64(off), "trace/off")
	b.ReportMetric(pairedRatio(times[2], times[0]), "trace/off-paired")
	b.ReportMetric(float64((hook - off).Nanoseconds()), "hook-extra-ns")
	b.ReportMetric(float64(raw.Nanoseconds()), "raw-median-ns")
	b.ReportMetric(float64(hook-off)/float64(raw), "hook-extra/raw")
}

// startPeerWith is startPeer with more arguments and environment.
func startPeerWith(b *testing.B, args, env []string) *stdioPeer {
	b.Helper()
	cmd := exec.Command(dshBin, append([]string{"serve", "--workspace", b.TempDir(), "--log-level", "warn"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
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
