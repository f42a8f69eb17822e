package toolbash

import (
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dsh-dev/dsh/internal/golden"
	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/proc"
)

// TestOutputSchemaFile: the embedded outputSchema is the one derived from the Go types
// (with -update, the file is rewritten).
func TestOutputSchemaFile(t *testing.T) {
	golden.JSON(t, "output_schema.json", outputSchemaJSON, derivedOutputSchema())
}

// derivedOutputSchema is the outputSchema of the Go types of the result.
func derivedOutputSchema() *jsonschema.Schema {
	fg := tools.SchemaFor[ForegroundValue]()
	fg.Properties["kind"].Enum = []any{KindForeground}
	// Nullable as single-type branches (portable to clients that map schemas onto a
	// one-type dialect); sandbox is omitted when absent, never null.
	for _, name := range []string{"exitCode", "signal"} {
		p := fg.Properties[name]
		var branches []*jsonschema.Schema
		for _, t := range p.Types {
			branches = append(branches, &jsonschema.Schema{Type: t})
		}
		p.Types, p.AnyOf = nil, branches
	}
	fg.Properties["sandbox"].Types, fg.Properties["sandbox"].Type = nil, "object"
	fg.Properties["usage"].Types, fg.Properties["usage"].Type = nil, "object"
	for _, p := range fg.Properties["usage"].Properties {
		p.Types, p.Type = nil, "integer"
	}
	fg.Properties["limit"].Enum = []any{string(proc.LimitMemory), string(proc.LimitProcesses), string(proc.LimitSessionMemory), string(proc.LimitSessionProcesses)}
	bg := tools.SchemaFor[BackgroundValue]()
	bg.Properties["kind"].Enum = []any{KindBackground}
	bg.Properties["handOver"].Enum = []any{handOverInput, handOverTimeout}
	return &jsonschema.Schema{
		Type:        "object",
		Description: `The typed result: kind "foreground" (the command ran to its end) or kind "background" (it was started as a job).`,
		OneOf:       []*jsonschema.Schema{fg, bg},
	}
}
