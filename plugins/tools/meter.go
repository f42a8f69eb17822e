package tools

import (
	"context"
	"sync/atomic"
)

// Meter follows how much output a running call has produced, for progress reports. The
// caller of a tool puts one in the call's context (WithMeter); a tool that produces
// output hands it a counter (MeterFrom(ctx).Track). It is safe for concurrent use, and a
// nil *Meter ignores everything, so a tool never needs to check for one.
type Meter struct {
	count atomic.Pointer[func() int64]
}

type meterKey struct{}

// WithMeter returns ctx carrying m.
func WithMeter(ctx context.Context, m *Meter) context.Context {
	return context.WithValue(ctx, meterKey{}, m)
}

// MeterFrom returns the Meter of ctx, or nil.
func MeterFrom(ctx context.Context) *Meter {
	m, _ := ctx.Value(meterKey{}).(*Meter)
	return m
}

// Track makes count the source of Bytes: the output produced so far, in bytes.
func (m *Meter) Track(count func() int64) {
	if m != nil && count != nil {
		m.count.Store(&count)
	}
}

// Bytes is the output produced so far, and whether the tool reports it at all.
func (m *Meter) Bytes() (int64, bool) {
	if m == nil {
		return 0, false
	}
	if f := m.count.Load(); f != nil {
		return (*f)(), true
	}
	return 0, false
}
