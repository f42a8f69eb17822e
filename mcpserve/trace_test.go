package mcpserve

import (
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/plugins/tools"
)

// A call's trace context is its _meta's traceparent and tracestate, else its HTTP
// headers'.
func TestTraceContextOf(t *testing.T) {
	const meta, header = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	h := http.Header{}
	h.Set("traceparent", header)
	h.Set("tracestate", "h=1")
	for _, c := range []struct {
		name string
		req  *mcp.CallToolRequest
		want tools.TraceContext
	}{
		{"meta", &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: mcp.Meta{"traceparent": meta, "tracestate": "m=1"}}, Extra: &mcp.RequestExtra{Header: h}},
			tools.TraceContext{Parent: meta, State: "m=1"}},
		{"header", &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{}, Extra: &mcp.RequestExtra{Header: h}}, tools.TraceContext{Parent: header, State: "h=1"}},
		{"none", &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: mcp.Meta{"traceparent": 7}}}, tools.TraceContext{}},
	} {
		if got := traceContextOf(c.req); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
