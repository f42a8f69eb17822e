package mcpserve

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/container"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// callUnserved answers a tools/call for a name the live registry does not hold. Once a
// reload in progress is over (registryWith waits for it), a tool that is back goes the
// usual way; one that a row of the composition declares, but that row is not active,
// is a tool error saying why — the model reads `tool "bash" is unavailable: row
// tool-bash is pending (…)`; any other name is the protocol error the SDK gives an
// unknown tool, with the closest tool's name suggested.
func (s *Server) callUnserved(ctx context.Context, req *mcp.CallToolRequest, next mcp.MethodHandler) (mcp.Result, error) {
	name := req.Params.Name
	reg := s.registryWith(ctx, name)
	if reg == nil {
		return next(ctx, "tools/call", req)
	}
	if _, ok := reg.Tool(name); ok {
		return next(ctx, "tools/call", req)
	}
	msg, unavailable := reg.Missing(name)
	if unavailable {
		res := tools.Errorf("%s", msg)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Text}}, IsError: true}, nil
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
}

// live reports whether the live registry holds the tool name.
func (s *Server) live(name string) bool {
	reg, ok := container.Lookup(s.rt, tools.Service)
	if !ok {
		return false
	}
	_, ok = reg.Tool(name)
	return ok
}
