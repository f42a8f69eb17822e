package tools

import "context"

// TraceContext is the W3C trace context a client sent with a call (the `traceparent`
// and `tracestate` of the request's _meta, or of its HTTP headers): what an observer
// that traces calls parents the call's span on. The registry only carries it.
type TraceContext struct {
	Parent string // traceparent: 00-<trace id>-<parent id>-<flags>
	State  string // tracestate, "" for none
}

type traceKey struct{}

// WithTraceContext returns ctx carrying tc for the calls made with it. An empty tc
// leaves ctx as it is.
func WithTraceContext(ctx context.Context, tc TraceContext) context.Context {
	if tc.Parent == "" {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, tc)
}

// TraceContextOf returns the trace context ctx carries, if any.
func TraceContextOf(ctx context.Context) (TraceContext, bool) {
	tc, ok := ctx.Value(traceKey{}).(TraceContext)
	return tc, ok
}
