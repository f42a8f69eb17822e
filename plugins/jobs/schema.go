package jobs

import (
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dsh-dev/dsh/plugins/tools"
)

// The MCP outputSchemas of job_output, job_list and job_kill, derived from their typed
// results (so the values the tools return satisfy them by construction).
var (
	outputValueSchema = withStatusEnum(tools.SchemaFor[OutputValue]())
	listValueSchema   = func() *jsonschema.Schema {
		s := tools.SchemaFor[ListValue]()
		jobs := s.Properties["jobs"]
		jobs.Types, jobs.Type = nil, "array" // never null
		withStatusEnum(jobs.Items)
		return s
	}()
	killValueSchema = func() *jsonschema.Schema {
		s := withStatusEnum(tools.SchemaFor[KillValue]())
		s.Properties["result"].Enum = []any{string(KillAlreadyFinished), string(KillCancellationRequested)}
		return s
	}()
)

// withStatusEnum restricts s's status property to the job statuses.
func withStatusEnum(s *jsonschema.Schema) *jsonschema.Schema {
	s.Properties["status"].Enum = []any{string(StatusRunning), string(StatusStopping), string(StatusCompleted), string(StatusKilled), string(StatusFailed)}
	return s
}
