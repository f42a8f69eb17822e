package mcpserve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// envelope is a JSON-RPC 2.0 message as it arrives.
type envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *jsonrpc.Error  `json:"error"`
}

// decodeMessage decodes one JSON-RPC 2.0 message as jsonrpc.DecodeMessage does (a
// "method" key makes it a request, else it is a response and needs an id), without the
// SDK's per-call decoder buffer.
func decodeMessage(data []byte) (jsonrpc.Message, error) {
	var e envelope
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&e); err != nil {
		return nil, typeError(err)
	}
	if dec.More() {
		return nil, errors.New("trailing data after the message")
	}
	if e.JSONRPC != "2.0" {
		return nil, fmt.Errorf(`want "jsonrpc": "2.0", got %q`, e.JSONRPC)
	}
	id, err := decodeID(e.ID)
	if err != nil {
		return nil, err
	}
	if e.Method != nil {
		return &jsonrpc.Request{Method: *e.Method, ID: id, Params: e.Params}, nil
	}
	if !id.IsValid() {
		return nil, errors.New(`neither a request (no "method") nor a response (no "id")`)
	}
	resp := &jsonrpc.Response{ID: id, Result: e.Result}
	if e.Error != nil {
		resp.Error = e.Error
	}
	return resp, nil
}

// maxExactID is the largest integer id a JSON number holds exactly (2^53).
const maxExactID = 1 << 53

// checkID accepts what MCP allows as a request id: a string or an integer (one a JSON
// number holds exactly, |n| ≤ 2^53). JSON-RPC 2.0 allows any number, though one
// "SHOULD NOT contain fractional parts"; MCP narrows that to "MUST be a string or
// integer", and the SDK keeps a numeric id as an integer, so an id of 1.5 (or 1.0,
// 1e3, or 2^60) could only be answered as another id. It is refused instead, as an
// Invalid Request, whose response has id null, as JSON-RPC prescribes when the id
// cannot be used. null or no id (a notification) is accepted.
func checkID(raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" || raw[0] == '"' {
		return nil
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err != nil || n > maxExactID || n < -maxExactID {
		return fmt.Errorf(`"id" must be a string or an integer, got %.40s`, raw)
	}
	return nil
}

// decodeID decodes an id that checkID accepts.
func decodeID(raw json.RawMessage) (jsonrpc.ID, error) {
	if err := checkID(raw); err != nil {
		return jsonrpc.ID{}, err
	}
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return jsonrpc.ID{}, nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return jsonrpc.ID{}, typeError(err)
		}
		return jsonrpc.MakeID(s)
	}
	n, _ := strconv.ParseInt(string(raw), 10, 64)
	return jsonrpc.MakeID(float64(n)) // exact: |n| ≤ 2^53
}

// errorLine is a JSON-RPC error response with id null (to bad input).
func errorLine(code int64, message string) []byte {
	data, _ := json.Marshal(struct {
		JSONRPC string        `json:"jsonrpc"`
		ID      *int          `json:"id"`
		Error   jsonrpc.Error `json:"error"`
	}{JSONRPC: "2.0", Error: jsonrpc.Error{Code: code, Message: message}})
	return data
}

// encodeMessage encodes msg as jsonrpc.EncodeMessage does. A successful response is
// written around its result as it is: the SDK encoded that already, compact, and
// encoding it again would only validate and copy it (a 64 kB output tail becomes a
// result of several hundred kB).
func encodeMessage(msg jsonrpc.Message) ([]byte, error) {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || resp.Error != nil || !resp.ID.IsValid() || len(resp.Result) == 0 || bytes.IndexByte(resp.Result, '\n') >= 0 {
		return jsonrpc.EncodeMessage(msg)
	}
	var id []byte
	switch v := resp.ID.Raw().(type) {
	case int64:
		id = strconv.AppendInt(nil, v, 10)
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // as the SDK encodes
		if err := enc.Encode(v); err != nil {
			return nil, err
		}
		id = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	const head, mid = `{"jsonrpc":"2.0","id":`, `,"result":`
	data := make([]byte, 0, len(head)+len(id)+len(mid)+len(resp.Result)+2) // + "}\n"
	data = append(data, head...)
	data = append(data, id...)
	data = append(data, mid...)
	data = append(data, resp.Result...)
	return append(data, '}'), nil
}

// typeError words a JSON value of the wrong type by what the message needs, never by
// the Go type it was decoded into: `expected a JSON object, got a JSON string`,
// `"method" must be a JSON string, got a JSON number`.
func typeError(err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err
	}
	if te.Field == "" {
		return fmt.Errorf("expected a JSON object, got a JSON %s", te.Value)
	}
	want := te.Type.Kind().String()
	switch want {
	case "ptr", "struct", "map":
		want = "object"
	case "slice":
		want = "array"
	case "int", "int64", "float64":
		want = "number"
	}
	return fmt.Errorf("%q must be a JSON %s, got a JSON %s", te.Field, want, te.Value)
}
