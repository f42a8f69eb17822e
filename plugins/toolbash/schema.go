package toolbash

import (
	_ "embed"
	"encoding/json"
)

// outputSchemaJSON is the bash tool's MCP outputSchema: one of ForegroundValue and
// BackgroundValue, told apart by kind. It is derived from the Go types, so the values
// the tool returns satisfy it by construction (a test validates real results), and
// embedded encoded: deriving and encoding it took a server's start about 0.3 ms. The
// package's tests derive it and fail when the file is not current (`go test
// ./plugins/toolbash -run TestOutputSchemaFile -update` rewrites it).
//
//go:embed output_schema.json
var outputSchemaJSON []byte

var outputSchema = json.RawMessage(outputSchemaJSON)
