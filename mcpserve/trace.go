package mcpserve

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/plugins/tools"
)

// traceContextOf is the W3C trace context a tools/call carries: its _meta's
// traceparent and tracestate (MCP's convention), else its HTTP request's headers.
func traceContextOf(req *mcp.CallToolRequest) tools.TraceContext {
	var tc tools.TraceContext
	if req.Params != nil {
		if m := req.Params.Meta; m != nil {
			tc.Parent, _ = m["traceparent"].(string)
			tc.State, _ = m["tracestate"].(string)
		}
	}
	if tc.Parent == "" && req.Extra != nil && req.Extra.Header != nil {
		tc.Parent, tc.State = req.Extra.Header.Get("traceparent"), req.Extra.Header.Get("tracestate")
	}
	return tc
}
