package otlp_test

import (
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // the server decodes gzip
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dsh-dev/dsh/tracing/internal/otlp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func spans(names ...string) []sdktrace.ReadOnlySpan {
	var stubs tracetest.SpanStubs
	for _, n := range names {
		stubs = append(stubs, tracetest.SpanStub{Name: n,
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID})})
	}
	return stubs.Snapshots()
}

func names(req *coltracepb.ExportTraceServiceRequest) []string {
	var out []string
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				out = append(out, s.GetName())
			}
		}
	}
	return out
}

// exporter reads the environment env describes (other OTLP variables unset).
func exporter(t *testing.T, protocol string, env map[string]string) *otlp.Exporter {
	t.Helper()
	cfg, err := config(t, protocol, env)
	if err != nil {
		t.Fatal(err)
	}
	e := otlp.New(cfg)
	t.Cleanup(func() { e.Shutdown(context.Background()) })
	return e
}

// OTLP/HTTP: the path under the generic endpoint, the headers, gzip.
func TestHTTPExport(t *testing.T) {
	var got struct {
		sync.Mutex
		path, auth, encoding, ctype string
		names                       []string
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		body, _ := io.ReadAll(zr)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		got.Lock()
		defer got.Unlock()
		got.path, got.auth, got.encoding, got.ctype = r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Encoding"), r.Header.Get("Content-Type")
		got.names = names(&req)
	}))
	defer srv.Close()
	e := exporter(t, otlp.HTTPProtobuf, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT":    srv.URL + "/base",
		"OTEL_EXPORTER_OTLP_HEADERS":     "Authorization=Bearer%20t0k,x-other = 1",
		"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
	})
	if err := e.ExportSpans(context.Background(), spans("a", "b")); err != nil {
		t.Fatal(err)
	}
	got.Lock()
	defer got.Unlock()
	if got.path != "/base/v1/traces" || got.auth != "Bearer t0k" || got.encoding != "gzip" || got.ctype != "application/x-protobuf" ||
		strings.Join(got.names, ",") != "a,b" {
		t.Fatalf("%s %s %s %s %v", got.path, got.auth, got.encoding, got.ctype, got.names)
	}
}

// 503 is retried; 400 fails at once with its status and body.
func TestHTTPStatuses(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n := calls.Add(1); {
		case r.URL.Path == "/bad":
			http.Error(w, "no such tenant", http.StatusBadRequest)
		case n == 1:
			http.Error(w, "busy", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	e := exporter(t, otlp.HTTPProtobuf, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": srv.URL + "/ok"})
	if err := e.ExportSpans(context.Background(), spans("a")); err != nil || calls.Load() != 2 {
		t.Fatalf("%v after %d requests", err, calls.Load())
	}
	calls.Store(0)
	e = exporter(t, otlp.HTTPProtobuf, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": srv.URL + "/bad"})
	err := e.ExportSpans(context.Background(), spans("a"))
	if err == nil || err.Error() != "OTLP/HTTP: 400 Bad Request: no such tenant\n" || calls.Load() != 1 {
		t.Fatalf("%v after %d requests", err, calls.Load())
	}
	// A receiver that stays unavailable: the export gives up at its timeout.
	e = exporter(t, otlp.HTTPProtobuf, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/", "OTEL_EXPORTER_OTLP_TIMEOUT": "300"})
	start := time.Now()
	if err := e.ExportSpans(context.Background(), spans("a")); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("gave up after %v", d)
	}
}

// collector is a real gRPC trace receiver.
type collector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
	auth  []string
	fail  []error // returned by the next calls, in turn
}

func (c *collector) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.fail) > 0 {
		err := c.fail[0]
		c.fail = c.fail[1:]
		return nil, err
	}
	md, _ := metadata.FromIncomingContext(ctx)
	c.auth = append(c.auth, md.Get("authorization")...)
	c.names = append(c.names, names(req)...)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func serveGRPC(t *testing.T, c *collector, opts ...grpc.ServerOption) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	coltracepb.RegisterTraceServiceServer(srv, c)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// OTLP/gRPC to grpc-go's server, in plain text (http://, and host:port with
// INSECURE) and over TLS with the CA of OTEL_EXPORTER_OTLP_CERTIFICATE; metadata and
// gzip.
func TestGRPCExport(t *testing.T) {
	c := &collector{}
	addr := serveGRPC(t, c)
	for _, env := range []map[string]string{
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + addr, "OTEL_EXPORTER_OTLP_HEADERS": "authorization=k1"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": addr, "OTEL_EXPORTER_OTLP_INSECURE": "true", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
			"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "authorization=k2"},
	} {
		if err := exporter(t, otlp.GRPC, env).ExportSpans(context.Background(), spans("x", "y")); err != nil {
			t.Fatalf("%v: %v", env, err)
		}
	}
	cert, caFile := selfSigned(t)
	ct := &collector{}
	tlsAddr := serveGRPC(t, ct, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))
	e := exporter(t, otlp.GRPC, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://" + tlsAddr, "OTEL_EXPORTER_OTLP_CERTIFICATE": caFile})
	if err := e.ExportSpans(context.Background(), spans("z")); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if strings.Join(c.names, ",") != "x,y,x,y" || strings.Join(c.auth, ",") != "k1,k2" || strings.Join(ct.names, ",") != "z" {
		t.Fatalf("plain %v %v, TLS %v", c.names, c.auth, ct.names)
	}
}

// UNAVAILABLE is retried; INVALID_ARGUMENT fails at once with its message.
func TestGRPCStatuses(t *testing.T) {
	c := &collector{fail: []error{status.Error(codes.Unavailable, "starting")}}
	addr := serveGRPC(t, c)
	e := exporter(t, otlp.GRPC, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + addr})
	if err := e.ExportSpans(context.Background(), spans("a")); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.fail = []error{status.Error(codes.InvalidArgument, "bad span: 100%")}
	c.mu.Unlock()
	err := e.ExportSpans(context.Background(), spans("b"))
	if err == nil || err.Error() != "OTLP/gRPC: status 3: bad span: 100%" {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if strings.Join(c.names, ",") != "a" {
		t.Fatal(c.names)
	}
}

// selfSigned is a certificate for 127.0.0.1 and the file of its PEM (the CA).
func selfSigned(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "otlp-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, file
}
