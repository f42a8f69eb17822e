package toolbash

import (
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dsh-dev/dsh/plugins/tools"
	"github.com/dsh-dev/dsh/proc"
)

// outputSchema is the bash tool's MCP outputSchema: one of ForegroundValue and
// BackgroundValue, told apart by kind. It is derived from the Go types, so the values
// the tool returns satisfy it by construction (a test validates real results).
var outputSchema = func() *jsonschema.Schema {
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
}()
