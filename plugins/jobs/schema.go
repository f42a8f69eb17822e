package jobs

import (
	_ "embed"
	"encoding/json"
)

// The MCP outputSchemas of job_output (and job_write), job_list and job_kill, derived
// from their typed results (so the values the tools return satisfy them by
// construction) and embedded encoded: deriving and encoding them took a server's start
// about 0.5 ms. The package's tests derive them and fail when a file is not current
// (`go test ./plugins/jobs -run TestOutputSchemaFiles -update` rewrites them).
var (
	//go:embed output_schema.json
	outputValueSchemaJSON []byte
	//go:embed list_schema.json
	listValueSchemaJSON []byte
	//go:embed kill_schema.json
	killValueSchemaJSON []byte

	outputValueSchema = json.RawMessage(outputValueSchemaJSON)
	listValueSchema   = json.RawMessage(listValueSchemaJSON)
	killValueSchema   = json.RawMessage(killValueSchemaJSON)
)
