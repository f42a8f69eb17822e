package otlp_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/tracing/internal/otlp"
)

// config reads the environment env describes (other OTLP variables unset).
func config(t *testing.T, protocol string, env map[string]string) (otlp.Config, error) {
	t.Helper()
	for _, k := range os.Environ() {
		if name, _, _ := strings.Cut(k, "="); strings.HasPrefix(name, "OTEL_EXPORTER_OTLP_") {
			t.Setenv(name, "")
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	return otlp.FromEnv(protocol)
}

// Where the spans go, and in plain text or over TLS, as the OTLP exporter
// specification reads the variables.
func TestConfigEndpoint(t *testing.T) {
	const (
		E  = "OTEL_EXPORTER_OTLP_ENDPOINT"
		TE = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
		IN = "OTEL_EXPORTER_OTLP_INSECURE"
	)
	for _, c := range []struct {
		protocol string
		env      map[string]string
		url      string
		tls      bool
	}{
		{otlp.HTTPProtobuf, map[string]string{E: "http://c:4318"}, "//c:4318/v1/traces", false},
		{otlp.HTTPProtobuf, map[string]string{E: "https://c/otlp/"}, "//c/otlp/v1/traces", true},
		{otlp.HTTPProtobuf, map[string]string{E: "http://c:4318", TE: "https://t:9/in"}, "//t:9/in", true},
		{otlp.HTTPProtobuf, map[string]string{TE: "http://t:9"}, "//t:9/", false},
		{otlp.HTTPProtobuf, map[string]string{E: "https://c", IN: "true"}, "//c/v1/traces", false},
		{otlp.GRPC, map[string]string{E: "http://c:4317/ignored"}, "//c:4317/opentelemetry.proto.collector.trace.v1.TraceService/Export", false},
		{otlp.GRPC, map[string]string{E: "https://c"}, "//c:443/opentelemetry.proto.collector.trace.v1.TraceService/Export", true},
		{otlp.GRPC, map[string]string{E: "c:4317"}, "//c:4317/opentelemetry.proto.collector.trace.v1.TraceService/Export", true},
		{otlp.GRPC, map[string]string{E: "c:4317", IN: "true"}, "//c:4317/opentelemetry.proto.collector.trace.v1.TraceService/Export", false},
		{otlp.GRPC, map[string]string{E: "http://c:4317", IN: "false"}, "//c:4317/opentelemetry.proto.collector.trace.v1.TraceService/Export", true},
	} {
		cfg, err := config(t, c.protocol, c.env)
		if err != nil || cfg.URL != c.url || (cfg.TLS != nil) != c.tls {
			t.Errorf("%s %v: %q TLS %v (%v); want %q TLS %v", c.protocol, c.env, cfg.URL, cfg.TLS != nil, err, c.url, c.tls)
		}
	}
}

func TestConfigValues(t *testing.T) {
	cfg, err := config(t, otlp.HTTPProtobuf, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c",
		"OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "1500",
		"OTEL_EXPORTER_OTLP_HEADERS": "a=1", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "b=%3D2%2C, c = 3 ",
		"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"})
	if err != nil || cfg.Timeout != 1500*time.Millisecond || len(cfg.Headers) != 2 || cfg.Headers["b"] != "=2," || cfg.Headers["c"] != "3" || !cfg.Gzip {
		t.Fatalf("%+v %v", cfg, err)
	}
	cfg, err = config(t, otlp.HTTPProtobuf, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_COMPRESSION": "none"})
	if err != nil || cfg.Timeout != otlp.DefaultTimeout || cfg.Gzip || cfg.Headers != nil {
		t.Fatalf("%+v %v", cfg, err)
	}
}

// A value that does not parse names its variable.
func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		protocol string
		env      map[string]string
		want     string
	}{
		{otlp.HTTPProtobuf, nil, "OTLP: no endpoint: set OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{otlp.HTTPProtobuf, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "c:4318"}, `OTLP: OTEL_EXPORTER_OTLP_ENDPOINT "c:4318": not an http or https URL`},
		{otlp.HTTPProtobuf, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "ftp://c"}, `OTLP: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT "ftp://c": not an http or https URL`},
		{otlp.GRPC, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "c:1/x"}, `OTLP: OTEL_EXPORTER_OTLP_ENDPOINT "c:1/x": not a host:port or URL`},
		{otlp.HTTPProtobuf, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_INSECURE": "yes"}, `OTLP: OTEL_EXPORTER_OTLP_INSECURE "yes": not true or false`},
		{otlp.HTTPProtobuf, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "10s"}, `OTLP: OTEL_EXPORTER_OTLP_TRACES_TIMEOUT "10s": not a positive number of milliseconds`},
		{otlp.HTTPProtobuf, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_HEADERS": "a=1,b"}, `OTLP: OTEL_EXPORTER_OTLP_HEADERS: "b" is not key=value`},
		{otlp.HTTPProtobuf, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent/ca.pem"}, `OTLP: OTEL_EXPORTER_OTLP_CERTIFICATE: open /nonexistent/ca.pem: no such file or directory`},
		{otlp.HTTPProtobuf, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c", "OTEL_EXPORTER_OTLP_CLIENT_KEY": "k.pem"}, `OTLP: OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY go together`},
	} {
		if _, err := config(t, c.protocol, c.env); err == nil || err.Error() != c.want {
			t.Errorf("%v: %v; want %s", c.env, err, c.want)
		}
	}
}

// The protocol: the traces variable first, http/protobuf by default; another names its
// variable.
func TestProtocol(t *testing.T) {
	for _, c := range []struct {
		env       map[string]string
		want, err string
	}{
		{nil, otlp.HTTPProtobuf, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, otlp.GRPC, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": " http/protobuf "}, otlp.HTTPProtobuf, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, "", `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL "http/json" is not supported (http/protobuf or grpc)`},
	} {
		config(t, otlp.HTTPProtobuf, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}) // clears the rest
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		got, err := otlp.Protocol()
		if got != c.want || (err == nil) != (c.err == "") || err != nil && err.Error() != c.err {
			t.Errorf("%v: %q %v; want %q %s", c.env, got, err, c.want, c.err)
		}
	}
}
