package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/dsh-dev/dsh/internal/proctest"
	"github.com/dsh-dev/dsh/mcpserve"
)

// BenchmarkServeInProcess drives `serve` over in-memory pipes in this process, so the
// serving path can be profiled (-cpuprofile, -trace); BenchmarkServeTrue in cmd/dsh
// measures the built binary.
func BenchmarkServeInProcess(b *testing.B) {
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	done := make(chan int)
	go func() {
		done <- run([]string{"serve", "--workspace", b.TempDir(), "--log-level", "warn"}, inR, outW, os.Stderr, Options{Tuning: mcpserve.DefaultTuning()})
		outW.Close()
	}()
	out := bufio.NewReaderSize(outR, 1<<20)
	id := 0
	roundTrip := func(rest string) []byte {
		id++
		prefix := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,`, id)
		if _, err := io.WriteString(inW, prefix+rest+"}\n"); err != nil {
			b.Fatal(err)
		}
		for {
			line, err := out.ReadBytes('\n')
			if err != nil {
				b.Fatal(err)
			}
			if bytes.HasPrefix(line, []byte(prefix)) {
				return line
			}
		}
	}
	roundTrip(`"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`)
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	proctest.PairedWithTrue(b, "serve", func() {
		roundTrip(`"method":"tools/call","params":{"name":"bash","arguments":{"command":"true","description":"Benchmark"}}`)
	})
	inW.Close()
	<-done
}
