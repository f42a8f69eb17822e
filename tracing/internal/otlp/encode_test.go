package otlp_test

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/dsh-dev/dsh/tracing/internal/otlp"
)

var (
	traceID = trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	spanID  = trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}
	parent  = trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	linked  = trace.SpanID{9, 9, 9, 9, 9, 9, 9, 9}
	t0      = time.Unix(1_700_000_000, 123_456_789)
)

// richSpan has every kind of field and attribute value the encoder writes.
func richSpan(res *resource.Resource) tracetest.SpanStub {
	state, _ := trace.ParseTraceState("k=v")
	return tracetest.SpanStub{
		Name: "tools/call bash",
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID,
			TraceFlags: trace.FlagsSampled, TraceState: state}),
		Parent:    trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: parent, Remote: true}),
		SpanKind:  trace.SpanKindServer,
		StartTime: t0, EndTime: t0.Add(1500 * time.Microsecond),
		Attributes: []attribute.KeyValue{
			attribute.String("s", "bash"), attribute.Bool("b", true), attribute.Bool("f", false),
			attribute.Int64("i", -4), attribute.Int64("zero", 0), attribute.Float64("d", 2.5),
			attribute.StringSlice("ss", []string{"a", ""}), attribute.Int64Slice("is", []int64{1, -1}),
			attribute.BoolSlice("bs", []bool{true, false}), attribute.Float64Slice("ds", []float64{0.5, 0}),
			{Key: "bytes", Value: attribute.ByteSliceValue([]byte{0, 1})},
			{Key: "map", Value: attribute.MapValue(attribute.String("in", strings.Repeat("x", 200)))},
		},
		DroppedAttributes: 2,
		Events: []sdktrace.Event{{Name: "ev", Time: t0.Add(time.Millisecond),
			Attributes: []attribute.KeyValue{attribute.Int("n", 1)}, DroppedAttributeCount: 1}},
		DroppedEvents: 3,
		Links: []sdktrace.Link{{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: linked, Remote: true}),
			Attributes: []attribute.KeyValue{attribute.String("why", "retry")}}},
		DroppedLinks:         4,
		Status:               sdktrace.Status{Code: codes.Error, Description: "failed"},
		Resource:             res,
		InstrumentationScope: instrumentation.Scope{Name: "github.com/dsh-dev/dsh", Version: "v1", SchemaURL: "https://x/s"},
	}
}

func kv(k string, v *commonpb.AnyValue) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: v}
}
func str(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}
func boolean(b bool) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: b}}
}
func integer(i int64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: i}}
}
func double(d float64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: d}}
}
func array(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
}

// What the encoder writes is what the official OTLP protos decode, field for field.
func TestRequestDecodesWithTheOfficialProtos(t *testing.T) {
	res := resource.NewWithAttributes("https://x/r", attribute.String("service.name", "dsh"))
	other := resource.NewSchemaless(attribute.String("service.name", "other"))
	plain := tracetest.SpanStub{Name: "exec bash-local", Resource: other,
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: linked}),
		StartTime:   t0, EndTime: t0}
	spans := tracetest.SpanStubs{richSpan(res), plain, richSpan(res)}.Snapshots()

	var got coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(otlp.Request(spans), &got); err != nil {
		t.Fatal(err)
	}
	rich := &tracepb.Span{
		TraceId: traceID[:], SpanId: spanID[:], TraceState: "k=v", ParentSpanId: parent[:],
		Flags: 0x01 | 0x100 | 0x200, Name: "tools/call bash", Kind: tracepb.Span_SPAN_KIND_SERVER,
		StartTimeUnixNano: uint64(t0.UnixNano()), EndTimeUnixNano: uint64(t0.Add(1500 * time.Microsecond).UnixNano()),
		Attributes: []*commonpb.KeyValue{
			kv("s", str("bash")), kv("b", boolean(true)), kv("f", boolean(false)),
			kv("i", integer(-4)), kv("zero", integer(0)), kv("d", double(2.5)),
			kv("ss", array(str("a"), str(""))), kv("is", array(integer(1), integer(-1))),
			kv("bs", array(boolean(true), boolean(false))), kv("ds", array(double(0.5), double(0))),
			kv("bytes", &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{0, 1}}}),
			kv("map", &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{
				Values: []*commonpb.KeyValue{kv("in", str(strings.Repeat("x", 200)))}}}}),
		},
		DroppedAttributesCount: 2,
		Events: []*tracepb.Span_Event{{TimeUnixNano: uint64(t0.Add(time.Millisecond).UnixNano()), Name: "ev",
			Attributes: []*commonpb.KeyValue{kv("n", integer(1))}, DroppedAttributesCount: 1}},
		DroppedEventsCount: 3,
		Links: []*tracepb.Span_Link{{TraceId: traceID[:], SpanId: linked[:], Flags: 0x100 | 0x200,
			Attributes: []*commonpb.KeyValue{kv("why", str("retry"))}}},
		DroppedLinksCount: 4,
		Status:            &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "failed"},
	}
	scope := &commonpb.InstrumentationScope{Name: "github.com/dsh-dev/dsh", Version: "v1"}
	want := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{
		{
			Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", str("dsh"))}},
			ScopeSpans: []*tracepb.ScopeSpans{{Scope: scope, Spans: []*tracepb.Span{rich, rich}, SchemaUrl: "https://x/s"}},
			SchemaUrl:  "https://x/r",
		},
		{
			Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", str("other"))}},
			ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{}, Spans: []*tracepb.Span{{
				TraceId: traceID[:], SpanId: linked[:], Flags: 0x100, Name: "exec bash-local",
				StartTimeUnixNano: uint64(t0.UnixNano()), EndTimeUnixNano: uint64(t0.UnixNano()),
			}}}},
		},
	}}
	if !proto.Equal(want, &got) {
		t.Fatalf("decoded request:\n%s\nwant:\n%s", prototext.Format(&got), prototext.Format(want))
	}
}

// Each size of length prefix (1 to 5 bytes) decodes: the encoder closes up, or opens,
// the room it left for the length.
func TestRequestLengths(t *testing.T) {
	lengths := []int{0, 100, 127, 128, 16383, 16384, 1 << 21}
	if !testing.Short() {
		lengths = append(lengths, 1<<28) // a length of five bytes, past the room left for four
	}
	for _, n := range lengths {
		s := tracetest.SpanStub{Name: strings.Repeat("n", n),
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID})}
		var got coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(otlp.Request(tracetest.SpanStubs{s}.Snapshots()), &got); err != nil {
			t.Fatalf("%d: %v", n, err)
		}
		if name := got.GetResourceSpans()[0].GetScopeSpans()[0].GetSpans()[0].GetName(); len(name) != n {
			t.Fatalf("%d: name of %d bytes", n, len(name))
		}
	}
}
