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

// track records calls in flight (and the session's revision, from initialize), and
// marks them cancelled when the client says so, so that their responses are dropped. A
// call whose id is in use by a call in flight is answered with -32600 (id null: the
// error must not pass for the answer to the other call) and not delivered: it reports
// false.
func (c *stdioConn) track(msg jsonrpc.Message) bool {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return true
	}
	if req.IsCall() {
		c.mu.Lock()
		_, dup := c.inflight[req.ID]
		if !dup {
			c.inflight[req.ID] = false
			c.unwritten++
			if req.Method == "tools/call" {
				c.tools[req.ID] = true
			}
			if req.Method == "initialize" {
				c.revision = negotiated(requestedRevision(req.Params))
			}
		}
		c.mu.Unlock()
		if dup {
			id, _ := json.Marshal(req.ID.Raw())
			c.writeError(jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: id %s is in use by a request in flight", id))
			return false
		}
		return true
	}
	if req.Method != "notifications/cancelled" {
		return true
	}
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return true
	}
	id, err := decodeID(p.RequestID)
	if err != nil || !id.IsValid() {
		return true
	}
	c.mu.Lock()
	if _, ok := c.inflight[id]; ok {
		c.inflight[id] = true
	}
	c.mu.Unlock()
	return true
}

// requestedRevision is the protocolVersion of initialize params.
func requestedRevision(params json.RawMessage) string {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(params, &p)
	return p.ProtocolVersion
}

// Write sends msg as one line; responses of a batch wait for the batch to be complete.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok {
		// Counted as unwritten until its line is out (or dropped): answers the client
		// does not take are what awaitRoom bounds.
		defer c.answered()
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

// answered counts one answer out (written or dropped).
func (c *stdioConn) answered() {
	c.mu.Lock()
	c.unwritten--
	if c.drained != nil && c.unwritten <= 0 {
		close(c.drained)
		c.drained = nil
	}
	c.mu.Unlock()
	c.signalRoom()
}
