package shell

import "github.com/dsh-dev/dsh/proc"

// Limited is implemented by executors that run their commands under resource limits
// (bash-local and bash-sandbox with `limits:`): callers that describe the executor to
// a model name them.
type Limited interface {
	// ResourceLimits are the limits every command runs under (zero fields: none).
	ResourceLimits() proc.ResourceLimits
}
