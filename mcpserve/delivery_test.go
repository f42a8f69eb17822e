package mcpserve

import (
	"context"
	"net/http/httptest"
	"testing"
)

// A response's last write counts as delivered only when its client was still there.
func TestDeliveryWriterTellsALastWriteToAGoneClient(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	w := &deliveryWriter{ResponseWriter: httptest.NewRecorder(), ctx: ctx}
	if w.delivered {
		t.Error("delivered before any write")
	}
	w.Write([]byte("event: message\n"))
	w.Flush()
	if !w.delivered {
		t.Error("a write while the client is there is not delivered")
	}
	cancel() // the client hangs up
	w.Write([]byte(`data: {"jsonrpc":"2.0","id":1,"result":{}}` + "\n\n"))
	if w.delivered {
		t.Error("a write after the client hung up counts as delivered")
	}
}
