package mcpserve

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// stdioBatch collects the responses to one JSON-RPC batch; they are written together,
// as one array, when the last one is in.
type stdioBatch struct {
	pending   int
	responses []*jsonrpc.Response
}

// track records calls in flight, and marks them cancelled when the client says so, so
// that their responses are dropped.
func (c *stdioConn) track(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return
	}
	if req.IsCall() {
		c.mu.Lock()
		c.inflight[req.ID] = false
		if req.Method == "tools/call" {
			c.tools[req.ID] = true
		}
		c.mu.Unlock()
		return
	}
	if req.Method != "notifications/cancelled" {
		return
	}
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil {
		return
	}
	c.mu.Lock()
	if _, ok := c.inflight[id]; ok {
		c.inflight[id] = true
	}
	c.mu.Unlock()
}

// Write sends msg as one line; responses of a batch wait for the batch to be complete.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		cancelled := c.inflight[resp.ID] && !(c.tools[resp.ID] && succeeded(resp))
		delete(c.inflight, resp.ID)
		delete(c.tools, resp.ID)
		batch := c.batches[resp.ID]
		delete(c.batches, resp.ID)
		var complete []*jsonrpc.Response
		if batch != nil {
			batch.pending--
			if !cancelled {
				batch.responses = append(batch.responses, resp)
			}
			if batch.pending == 0 && len(batch.responses) > 0 {
				complete = batch.responses
			}
		}
		c.mu.Unlock()
		switch {
		case batch != nil && complete == nil:
			return nil
		case batch != nil:
			return c.writeBatch(complete)
		case cancelled:
			return nil
		}
	}
	data, err := encodeMessage(msg)
	if err != nil {
		return fmt.Errorf("stdio: encoding a message: %w", err)
	}
	return c.writeLine(data)
}

// succeeded reports whether resp answers a tools/call with a result that is no error.
func succeeded(resp *jsonrpc.Response) bool {
	var res struct {
		IsError bool `json:"isError"`
	}
	return resp.Error == nil && json.Unmarshal(resp.Result, &res) == nil && !res.IsError
}
