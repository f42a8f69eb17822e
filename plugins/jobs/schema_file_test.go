package jobs

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dsh-dev/dsh/plugins/tools"
)

var update = flag.Bool("update", false, "rewrite the *_schema.json files from the Go types")

// TestOutputSchemaFiles: each embedded outputSchema is the one derived from its Go type
// (with -update, the files are rewritten).
func TestOutputSchemaFiles(t *testing.T) {
	for file, c := range map[string]struct {
		embedded []byte
		derived  *jsonschema.Schema
	}{
		"output_schema.json": {outputValueSchemaJSON, derivedOutputSchema()},
		"list_schema.json":   {listValueSchemaJSON, derivedListSchema()},
		"kill_schema.json":   {killValueSchemaJSON, derivedKillSchema()},
	} {
		want, err := json.MarshalIndent(c.derived, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, '\n')
		if *update {
			if err := os.WriteFile(file, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !bytes.Equal(c.embedded, want) {
			t.Errorf("%s is not the schema of its Go type: run go test ./plugins/jobs -run TestOutputSchemaFiles -update\nwant:\n%s", file, want)
		}
	}
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
