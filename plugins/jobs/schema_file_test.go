package jobs

import (
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dsh-dev/dsh/internal/golden"
	"github.com/dsh-dev/dsh/plugins/tools"
)

// TestOutputSchemaFiles: each embedded outputSchema is the one derived from its Go type
// (with -update, the files are rewritten).
func TestOutputSchemaFiles(t *testing.T) {
	golden.JSON(t, "output_schema.json", outputValueSchemaJSON, derivedOutputSchema())
	golden.JSON(t, "list_schema.json", listValueSchemaJSON, derivedListSchema())
	golden.JSON(t, "kill_schema.json", killValueSchemaJSON, derivedKillSchema())
}

func derivedOutputSchema() *jsonschema.Schema {
	return withStatusEnum(tools.SchemaFor[OutputValue]())
}

func derivedListSchema() *jsonschema.Schema {
	s := tools.SchemaFor[ListValue]()
	jobs := s.Properties["jobs"]
	jobs.Types, jobs.Type = nil, "array" // never null
	withStatusEnum(jobs.Items)
	return s
}

func derivedKillSchema() *jsonschema.Schema {
	s := withStatusEnum(tools.SchemaFor[KillValue]())
	s.Properties["result"].Enum = []any{string(KillAlreadyFinished), string(KillCancellationRequested)}
	return s
}

// withStatusEnum restricts s's status property to the job statuses.
func withStatusEnum(s *jsonschema.Schema) *jsonschema.Schema {
	s.Properties["status"].Enum = []any{string(StatusRunning), string(StatusStopping), string(StatusCompleted), string(StatusKilled), string(StatusFailed)}
	return s
}
