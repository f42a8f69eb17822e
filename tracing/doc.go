// Package tracing exports OpenTelemetry spans of dsh's tool calls over OTLP, configured
// by the standard OTEL_* environment variables alone (docs/hooks.md, "Traces"): one
// span per tool call (`tools/call <tool>`), parented by the client's W3C trace context,
// and a child per command run (`exec <executor>`).
//
// Without an OTLP endpoint in the environment nothing is set up: FromEnv returns nil,
// no SDK is initialised and no observer is added, so a call pays nothing. The spans
// are made when a call has ended, from what the registry's observers are told (the
// call's start and duration, the command's own start and end), and exported in the
// background; Shutdown flushes them.
package tracing
