package mcpserve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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

// batchRevision is the first revision without JSON-RPC batches (removed in 2025-06-18).
const batchRevision = "2025-06-18"

// negotiated is the revision the session lane agrees on when a client asks for
// requested in initialize: that one if dsh serves it, else the newest.
func negotiated(requested string) string {
	if slices.Contains(sessionProtocolVersions, requested) {
		return requested
	}
	return sessionProtocolVersions[0]
}

// message is what the HTTP front reads of a POST body: enough to route it.
type message struct {
	stateless bool // a request's _meta names the stateless revision (or later)
	batch     bool // a JSON-RPC batch
	call      bool // it holds a request with an id other than subscriptions/listen: an answer is owed
}

// wireMessage is the part of a JSON-RPC message the front reads.
type wireMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Meta map[string]any `json:"_meta"`
	} `json:"params"`
}

// parseMessage reads body as one JSON-RPC message or a batch of them. A body that is
// neither is left for the lane to answer; an id that is neither a string nor an
// integer is an error (see checkID).
func parseMessage(body []byte) (message, error) {
	var msgs []wireMessage
	var m message
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' {
		m.batch = true
		if json.Unmarshal(body, &msgs) != nil {
			return m, nil
		}
	} else {
		var one wireMessage
		if json.Unmarshal(body, &one) != nil {
			return m, nil // not one JSON-RPC object: the session lane answers it
		}
		msgs = []wireMessage{one}
	}
	for _, w := range msgs {
		if err := checkID(w.ID); err != nil {
			return m, err
		}
		if v, _ := w.Params.Meta[mcp.MetaKeyProtocolVersion].(string); !m.batch && isStateless(v) {
			m.stateless = true
		}
		if w.Method != "" && len(w.ID) > 0 && string(w.ID) != "null" && w.Method != "subscriptions/listen" {
			m.call = true
		}
	}
	return m, nil
}

// readMessage reads r's body whole, within the read timeout, leaves it in place for the
// lane and parses it. A failure is answered here (ok false).
func (f *httpFront) readMessage(w http.ResponseWriter, r *http.Request) (m message, ok bool) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(f.s.http.readTimeout()))
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	var ne net.Error
	switch {
	// On a failure the deadline stays: what is left of the body is not waited for, and
	// the connection closes.
	case errors.As(err, &ne) && ne.Timeout():
		w.Header().Set("Connection", "close")
		http.Error(w, fmt.Sprintf("the request body did not arrive within %s", f.s.http.readTimeout()), http.StatusRequestTimeout)
		return m, false
	case err != nil:
		w.Header().Set("Connection", "close")
		http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
		return m, false
	case len(body) > maxBodyBytes:
		w.Header().Set("Connection", "close")
		http.Error(w, fmt.Sprintf("request body exceeds %d bytes", maxBodyBytes), http.StatusRequestEntityTooLarge)
		return m, false
	}
	// Cleared before anything else: a deadline left on the connection would end the
	// request (and a long call or stream with it) once it passed.
	_ = rc.SetReadDeadline(time.Time{})
	r.Body = io.NopCloser(bytes.NewReader(body))
	if m, err = parseMessage(body); err != nil {
		writeInvalid(w, err)
		return m, false
	}
	return m, true
}

// writeInvalid answers an invalid request: HTTP 400 with a JSON-RPC error, id null.
func writeInvalid(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(errorLine(jsonrpc.CodeInvalidRequest, "Invalid Request: "+err.Error()))
}

// batchRefusal is why a batch is refused, or "": batches exist up to the 2025-03-26
// revision only, so a batch needs a session that agreed on one of those (whatever
// headers its requests carry).
func (f *httpFront) batchRefusal(r *http.Request, stateless bool) string {
	if stateless {
		return batchRefusal(statelessRevision)
	}
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		return batchRefusal("")
	}
	for ss := range f.sessions.server.Sessions() {
		if ss.ID() != id {
			continue
		}
		v := ""
		if p := ss.InitializeParams(); p != nil {
			v = negotiated(p.ProtocolVersion)
		}
		return batchRefusal(v)
	}
	return "" // an unknown session: the lane answers it
}

// batchRefusal is why a batch is refused in a session of revision ("" before
// initialize), or "" when that revision has batches.
func batchRefusal(revision string) string {
	switch {
	case revision == "":
		return "JSON-RPC batching needs an initialized session of revision 2025-03-26 or older"
	case revision >= batchRevision:
		return "JSON-RPC batching is not supported in " + batchRevision + " and later (this session's version: " + revision + ")"
	}
	return ""
}
