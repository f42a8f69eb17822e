package mcpserve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// statelessRevision is the MCP revision of the stateless lane: no initialize, no
// sessions; per-request _meta, server/discover, input_required, subscriptions/listen.
const statelessRevision = "2026-07-28"

// sessionProtocolVersions are the revisions of the session lane: the initialize
// handshake and sessions.
var sessionProtocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// allProtocolVersions are every revision dsh serves, newest first.
var allProtocolVersions = append([]string{statelessRevision}, sessionProtocolVersions...)

// isStateless reports whether a negotiated or per-request protocol version is the
// stateless revision (or later).
func isStateless(version string) bool { return version >= statelessRevision }

// statelessRequest reports whether r uses the stateless revision: by its
// Mcp-Protocol-Version header, else by the _meta of the JSON-RPC request in its body
// (which is left in place for the handler).
func statelessRequest(r *http.Request) (bool, error) {
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
		return isStateless(v), nil
	}
	if r.Method != http.MethodPost || r.Body == nil {
		return false, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return false, fmt.Errorf("reading the request body: %w", err)
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	var msg struct {
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return false, nil // not one JSON-RPC object: the session lane answers it
	}
	v, _ := msg.Params.Meta[mcp.MetaKeyProtocolVersion].(string)
	return isStateless(v), nil
}
