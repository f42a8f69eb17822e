package otlp

import (
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Protobuf wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// Span flags of the OTLP protocol: the W3C trace flags in the low byte, and whether
// the parent is known to be remote.
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// buf builds a protobuf message. A nested message is written after a placeholder and
// its length filled in when it ends (begin, end), so the whole request is one buffer.
// (Package protowire writes the same wire format, but its imports' initialisation
// reads the executable at every start, which this package exists to spare.) A field
// of a zero value is left out, as proto3 does; a oneof's value is written whatever it
// is (putFixed64, lenDelim).
type buf struct{ b []byte }

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func (w *buf) varint(v uint64) { w.b = appendVarint(w.b, v) }

func (w *buf) tag(field, wire int) { w.varint(uint64(field)<<3 | uint64(wire)) }

func (w *buf) uint(field int, v uint64) {
	if v != 0 {
		w.tag(field, wireVarint)
		w.varint(v)
	}
}

func (w *buf) putFixed64(v uint64) {
	for i := 0; i < 8; i++ {
		w.b = append(w.b, byte(v>>(8*i)))
	}
}

func (w *buf) fixed64(field int, v uint64) {
	if v != 0 {
		w.tag(field, wireFixed64)
		w.putFixed64(v)
	}
}

func (w *buf) fixed32(field int, v uint32) {
	if v != 0 {
		w.tag(field, wireFixed32)
		for i := 0; i < 4; i++ {
			w.b = append(w.b, byte(v>>(8*i)))
		}
	}
}

// lenDelim writes v as a length-delimited field, even when empty.
func lenDelim[T string | []byte](w *buf, field int, v T) {
	w.tag(field, wireBytes)
	w.varint(uint64(len(v)))
	w.b = append(w.b, v...)
}

func (w *buf) bytes(field int, v []byte) {
	if len(v) != 0 {
		lenDelim(w, field, v)
	}
}

func (w *buf) string(field int, v string) {
	if v != "" {
		lenDelim(w, field, v)
	}
}

// lenSize is the room left for a nested message's length, which its end fills and
// shrinks (or, past 256 MiB, grows): a varint of up to 4 bytes.
const lenSize = 4

// begin starts a nested message of field; end finishes it.
func (w *buf) begin(field int) int {
	w.tag(field, wireBytes)
	w.b = append(w.b, make([]byte, lenSize)...)
	return len(w.b)
}

// end writes the length of the message begun at start, as a varint, in the room
// left for it, moving the message to close up (or open) the difference.
func (w *buf) end(start int) {
	n := len(w.b) - start
	var room [10]byte
	l := appendVarint(room[:0], uint64(n))
	k := len(l)
	hole := start - lenSize
	switch {
	case k < lenSize:
		copy(w.b[hole+k:], w.b[start:])
		w.b = w.b[:len(w.b)-(lenSize-k)]
	case k > lenSize:
		extra := k - lenSize
		w.b = append(w.b, make([]byte, extra)...)
		copy(w.b[start+extra:], w.b[start:start+n])
	}
	copy(w.b[hole:], l)
}

// Request encodes spans as an OTLP ExportTraceServiceRequest: one ResourceSpans per
// resource, one ScopeSpans per instrumentation scope, in the order first seen.
func Request(spans []sdktrace.ReadOnlySpan) []byte {
	w := &buf{}
	for _, rg := range group(spans) {
		rs := w.begin(1) // resource_spans
		r := w.begin(1)  // resource
		resourceAttrs(w, rg.res)
		w.end(r)
		for _, sg := range rg.scopes {
			ss := w.begin(2) // scope_spans
			scope(w, sg.scope)
			for _, s := range sg.spans {
				span(w, s)
			}
			w.string(3, sg.scope.SchemaURL)
			w.end(ss)
		}
		if rg.res != nil {
			w.string(3, rg.res.SchemaURL())
		}
		w.end(rs)
	}
	return w.b
}

type resourceGroup struct {
	res    *resource.Resource
	scopes []*scopeGroup
}

type scopeGroup struct {
	scope instrumentation.Scope
	spans []sdktrace.ReadOnlySpan
}

func group(spans []sdktrace.ReadOnlySpan) []*resourceGroup {
	var out []*resourceGroup
	byRes := map[attribute.Distinct]*resourceGroup{}
	byScope := map[attribute.Distinct]map[instrumentation.Scope]*scopeGroup{}
	for _, s := range spans {
		key := s.Resource().Equivalent()
		rg := byRes[key]
		if rg == nil {
			rg = &resourceGroup{res: s.Resource()}
			byRes[key], byScope[key] = rg, map[instrumentation.Scope]*scopeGroup{}
			out = append(out, rg)
		}
		sc := s.InstrumentationScope()
		sg := byScope[key][sc]
		if sg == nil {
			sg = &scopeGroup{scope: sc}
			byScope[key][sc] = sg
			rg.scopes = append(rg.scopes, sg)
		}
		sg.spans = append(sg.spans, s)
	}
	return out
}

func resourceAttrs(w *buf, res *resource.Resource) {
	if res == nil {
		return
	}
	for _, kv := range res.Attributes() {
		keyValue(w, 1, kv)
	}
}

func scope(w *buf, sc instrumentation.Scope) {
	m := w.begin(1)
	w.string(1, sc.Name)
	w.string(2, sc.Version)
	for _, kv := range sc.Attributes.ToSlice() {
		keyValue(w, 3, kv)
	}
	w.end(m)
}

func span(w *buf, s sdktrace.ReadOnlySpan) {
	m := w.begin(2)
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	w.bytes(1, tid[:])
	w.bytes(2, sid[:])
	w.string(3, sc.TraceState().String())
	if p := s.Parent(); p.SpanID().IsValid() {
		pid := p.SpanID()
		w.bytes(4, pid[:])
	}
	w.string(5, s.Name())
	w.uint(6, uint64(kind(s.SpanKind())))
	w.fixed64(7, unixNano(s.StartTime().UnixNano()))
	w.fixed64(8, unixNano(s.EndTime().UnixNano()))
	for _, kv := range s.Attributes() {
		keyValue(w, 9, kv)
	}
	w.uint(10, uint64(s.DroppedAttributes()))
	for _, e := range s.Events() {
		ev := w.begin(11)
		w.fixed64(1, unixNano(e.Time.UnixNano()))
		w.string(2, e.Name)
		for _, kv := range e.Attributes {
			keyValue(w, 3, kv)
		}
		w.uint(4, uint64(e.DroppedAttributeCount))
		w.end(ev)
	}
	w.uint(12, uint64(s.DroppedEvents()))
	for _, l := range s.Links() {
		link(w, l)
	}
	w.uint(14, uint64(s.DroppedLinks()))
	status(w, s.Status())
	w.fixed32(16, spanFlags(sc, s.Parent()))
	w.end(m)
}

func link(w *buf, l sdktrace.Link) {
	m := w.begin(13)
	tid, sid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
	w.bytes(1, tid[:])
	w.bytes(2, sid[:])
	w.string(3, l.SpanContext.TraceState().String())
	for _, kv := range l.Attributes {
		keyValue(w, 4, kv)
	}
	w.uint(5, uint64(l.DroppedAttributeCount))
	w.fixed32(6, spanFlags(l.SpanContext, l.SpanContext))
	w.end(m)
}

// spanFlags are the OTLP flags of a span of sc whose parent is parent (a link's own
// context is its "parent": whether it is remote).
func spanFlags(sc, parent trace.SpanContext) uint32 {
	f := uint32(sc.TraceFlags()) | flagHasIsRemote
	if parent.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

func status(w *buf, st sdktrace.Status) {
	var code uint64 // STATUS_CODE_UNSET
	switch st.Code {
	case codes.Ok:
		code = 1
	case codes.Error:
		code = 2
	}
	if code == 0 && st.Description == "" {
		return
	}
	m := w.begin(15)
	w.string(2, st.Description)
	w.uint(3, code)
	w.end(m)
}

// kind maps the API's span kinds to OTLP's, which number them alike (0 unspecified).
func kind(k trace.SpanKind) trace.SpanKind {
	if k < trace.SpanKindUnspecified || k > trace.SpanKindConsumer {
		return trace.SpanKindUnspecified
	}
	return k
}

func unixNano(n int64) uint64 {
	if n < 0 {
		return 0
	}
	return uint64(n)
}

func keyValue(w *buf, field int, kv attribute.KeyValue) {
	m := w.begin(field)
	w.string(1, string(kv.Key))
	anyValue(w, 2, kv.Value)
	w.end(m)
}

// anyValue writes v as an AnyValue message of field. An empty value is an empty
// message.
func anyValue(w *buf, field int, v attribute.Value) {
	m := w.begin(field)
	switch v.Type() {
	case attribute.BOOL:
		w.tag(2, wireVarint)
		w.varint(b2u(v.AsBool()))
	case attribute.INT64:
		w.tag(3, wireVarint)
		w.varint(uint64(v.AsInt64()))
	case attribute.FLOAT64:
		w.tag(4, wireFixed64)
		w.putFixed64(math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		lenDelim(w, 1, v.AsString())
	case attribute.BYTESLICE:
		lenDelim(w, 7, v.AsByteSlice())
	case attribute.BOOLSLICE:
		bs := v.AsBoolSlice()
		array(w, len(bs), func(i int) attribute.Value { return attribute.BoolValue(bs[i]) })
	case attribute.INT64SLICE:
		is := v.AsInt64Slice()
		array(w, len(is), func(i int) attribute.Value { return attribute.Int64Value(is[i]) })
	case attribute.FLOAT64SLICE:
		fs := v.AsFloat64Slice()
		array(w, len(fs), func(i int) attribute.Value { return attribute.Float64Value(fs[i]) })
	case attribute.STRINGSLICE:
		ss := v.AsStringSlice()
		array(w, len(ss), func(i int) attribute.Value { return attribute.StringValue(ss[i]) })
	case attribute.SLICE:
		vs := v.AsSlice()
		array(w, len(vs), func(i int) attribute.Value { return vs[i] })
	case attribute.MAP:
		l := w.begin(6) // kvlist_value
		for _, kv := range v.AsMap() {
			keyValue(w, 1, kv)
		}
		w.end(l)
	}
	w.end(m)
}

// array writes an ArrayValue (field 5 of AnyValue) of n values.
func array(w *buf, n int, at func(int) attribute.Value) {
	a := w.begin(5)
	for i := 0; i < n; i++ {
		anyValue(w, 1, at(i))
	}
	w.end(a)
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
