// Package otlptest is an OTLP trace receiver for tests, over OTLP/HTTP (Start) or
// OTLP/gRPC (StartGRPC, grpc-go's server): it decodes what an exporter sends with the
// official OTLP protobuf types and keeps the spans.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver is a running OTLP endpoint: OTLP/HTTP (POST /v1/traces) or OTLP/gRPC.
type Receiver struct {
	srv  *httptest.Server
	grpc *grpcReceiver

	mu    sync.Mutex
	spans []Span
	bad   []string // why requests were refused
}

// Span is a received span, its ids in hex.
type Span struct {
	Name, TraceID, SpanID, ParentID string
	Kind                            tracepb.Span_SpanKind
	Start, End                      uint64 // Unix nanoseconds
	Attributes                      map[string]any
	Status                          tracepb.Status_StatusCode
	// Resource holds the attributes of the span's resource (service.name…).
	Resource map[string]any
}

// Start starts a receiver; Close stops it.
func Start() *Receiver {
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	return r
}

// Endpoint is the base URL to give OTEL_EXPORTER_OTLP_ENDPOINT.
func (r *Receiver) Endpoint() string {
	if r.grpc != nil {
		return "http://" + r.grpc.addr
	}
	return r.srv.URL
}

// Close stops the receiver.
func (r *Receiver) Close() {
	if r.grpc != nil {
		r.grpc.srv.Stop()
		return
	}
	r.srv.Close()
}

// Spans are the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Refused lists why requests were refused (a wrong path, a body that does not decode).
func (r *Receiver) Refused() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bad...)
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		r.refuse(w, req.Method+" "+req.URL.Path)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			r.refuse(w, err.Error())
			return
		}
		body = gz
	}
	data, err := io.ReadAll(body)
	if err != nil {
		r.refuse(w, err.Error())
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &msg); err != nil {
		r.refuse(w, "decode: "+err.Error())
		return
	}
	r.keep(&msg)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *Receiver) refuse(w http.ResponseWriter, why string) {
	r.mu.Lock()
	r.bad = append(r.bad, why)
	r.mu.Unlock()
	http.Error(w, why, http.StatusBadRequest)
}

func (r *Receiver) keep(msg *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range msg.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, Span{
					Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId()), Kind: s.GetKind(),
					Start: s.GetStartTimeUnixNano(), End: s.GetEndTimeUnixNano(),
					Attributes: attrs(s.GetAttributes()), Status: s.GetStatus().GetCode(), Resource: res,
				})
			}
		}
	}
}

// attrs turns OTLP attributes into Go values: string, bool, int64, float64.
func attrs(kvs []*commonpb.KeyValue) map[string]any {
	out := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = v.BoolValue
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = v.IntValue
		case *commonpb.AnyValue_DoubleValue:
			out[kv.GetKey()] = v.DoubleValue
		default:
			out[kv.GetKey()] = kv.GetValue().String()
		}
	}
	return out
}
