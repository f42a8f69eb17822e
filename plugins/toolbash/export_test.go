package toolbash

// Internals the black-box tests check directly. The tests pin the contract strings these
// produce byte for byte; the package itself exports only the plugin and the values.
var (
	Render        = render
	RenderRead    = renderRead
	OutcomeOf     = outcomeOf
	ValueOf       = valueOf
	PresentCall   = presentCall
	PresentResult = presentResult
	Description   = toolDescription
	DeniedMarker  = deniedMarker
)

// Contract strings (each also asserted literally by a test).
const (
	EscalationHint = escalationHint
	PromptText     = promptText
)

// OutputSchema is the bash tool's MCP outputSchema.
var OutputSchema = outputSchema
