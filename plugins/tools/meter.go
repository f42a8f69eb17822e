package tools

import (
	"context"
	"sync/atomic"
	"unicode/utf8"
)

// Meter follows how a running call advances, for progress reports: how much output it
// has produced and its last line. The caller of a tool puts one in the call's context
// (WithMeter); a tool that produces output hands it its sources (MeterFrom(ctx).Track,
// TrackLine). It is safe for concurrent use, and a nil *Meter ignores everything, so a
// tool never needs to check for one.
type Meter struct {
	count atomic.Pointer[func() int64]
	line  atomic.Pointer[func() string]
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

// TrackLine makes line the source of LastLine: the last line of the output so far, as
// text (a terminal's output already rendered as the terminal shows it).
func (m *Meter) TrackLine(line func() string) {
	if m != nil && line != nil {
		m.line.Store(&line)
	}
}

// MaxLastLine is how many characters of the last line a progress report carries.
const MaxLastLine = 120

// LastLine is the last line of the output so far, at most MaxLastLine characters (its
// beginning), and whether the tool reports one: false without a source or while the
// output has no line that is not blank.
func (m *Meter) LastLine() (string, bool) {
	if m == nil {
		return "", false
	}
	f := m.line.Load()
	if f == nil {
		return "", false
	}
	line := (*f)()
	if line == "" {
		return "", false
	}
	if utf8.RuneCountInString(line) > MaxLastLine {
		n := 0
		for i := range line {
			if n == MaxLastLine {
				line = line[:i]
				break
			}
			n++
		}
	}
	return line, true
}
