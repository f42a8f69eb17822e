package mcpserve

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/plugins/tools"
)

// progressInterval is how often a call with a progress token is reported on.
const progressInterval = 5 * time.Second

// reportProgress sends notifications/progress for token every progressInterval until the
// returned function is called (it returns once no more can be sent): progress = seconds
// elapsed, message "running 12s, 3.1 MB of output: <last line>" (the output and its
// last line when the tool reports them; the line at most 120 characters).
func reportProgress(ctx context.Context, ss *mcp.ServerSession, token any, meter *tools.Meter) (done func()) {
	ctx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		tick := time.NewTicker(progressInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			elapsed := math.Floor(time.Since(start).Seconds())
			msg := fmt.Sprintf("running %.0fs", elapsed)
			if n, ok := meter.Bytes(); ok {
				msg += ", " + formatBytes(n) + " of output"
				if line, ok := meter.LastLine(); ok {
					msg += ": " + line
				}
			}
			_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: elapsed, Message: msg})
		}
	}()
	return func() {
		cancel()
		<-finished
	}
}

// formatBytes renders n in decimal units: "812 bytes", "12.3 kB", "3.1 MB", "1.0 GB".
func formatBytes(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d bytes", n)
	case n < 1000*1000:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	case n < 1000*1000*1000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.1f GB", float64(n)/1e9)
}
