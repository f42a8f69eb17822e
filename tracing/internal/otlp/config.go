package otlp

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
)

// Protocols this package speaks.
const (
	HTTPProtobuf = "http/protobuf"
	GRPC         = "grpc"
)

// grpcMethod is the path of the OTLP/gRPC trace export call.
const grpcMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// DefaultTimeout bounds one export (its retries included) unless the environment sets
// another.
const DefaultTimeout = 10 * time.Second

// Config is where and how spans are sent.
type Config struct {
	// Protocol is HTTPProtobuf or GRPC.
	Protocol string
	// URL is the request's URL: the traces path of an OTLP/HTTP receiver, or the
	// gRPC method on the receiver's authority (http: plain text, https: TLS).
	URL string
	// Headers are added to every request (gRPC metadata, for GRPC).
	Headers map[string]string
	// Timeout bounds one export, its retries included.
	Timeout time.Duration
	// Gzip compresses each request's body.
	Gzip bool
	// TLS configures a https URL's connections.
	TLS *tls.Config
}

// FromEnv reads the standard OTLP exporter variables for protocol
// (OTEL_EXPORTER_OTLP_*, each overridden by its OTEL_EXPORTER_OTLP_TRACES_* twin): the
// endpoint, INSECURE, HEADERS, TIMEOUT, COMPRESSION, CERTIFICATE, CLIENT_CERTIFICATE and
// CLIENT_KEY. An endpoint must be set. A value that does not parse is an error naming
// its variable.
func FromEnv(protocol string) (Config, error) {
	cfg := Config{Protocol: protocol, Timeout: DefaultTimeout, TLS: &tls.Config{}}
	steps := []func(*Config) error{endpoint, insecure, headers, timeout, compression, certificates}
	for _, step := range steps {
		if err := step(&cfg); err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

// Protocol is the protocol the environment asks for: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
// else OTEL_EXPORTER_OTLP_PROTOCOL, else HTTPProtobuf; another is an error naming its
// variable.
func Protocol() (string, error) {
	switch p, variable := env("PROTOCOL"); p {
	case "":
		return HTTPProtobuf, nil
	case HTTPProtobuf, GRPC:
		return p, nil
	default:
		return "", fmt.Errorf("%s %q is not supported (http/protobuf or grpc)", variable, p)
	}
}

// env returns the traces variable of name if set, else the generic one, trimmed, and
// the variable's full name.
func env(name string) (value, variable string) {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_" + name, "OTEL_EXPORTER_OTLP_" + name} {
		if s := strings.TrimSpace(os.Getenv(v)); s != "" {
			return s, v
		}
	}
	return "", ""
}

// endpoint sets the URL. OTLP/HTTP: a per-signal endpoint is the URL as given (path /
// when it has none), a generic one the base of /v1/traces. OTLP/gRPC: the endpoint's
// host (a URL with a scheme), or the endpoint itself; http and a scheme-less
// host:port with OTEL_EXPORTER_OTLP_INSECURE are plain text.
func endpoint(cfg *Config) error {
	raw, variable := env("ENDPOINT")
	if raw == "" {
		return fmt.Errorf("OTLP: no endpoint: set OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	}
	u, err := url.Parse(raw)
	scheme := ""
	if err == nil {
		scheme = strings.ToLower(u.Scheme)
	}
	if cfg.Protocol == GRPC {
		target := raw
		if err == nil && (scheme == "http" || scheme == "https") {
			target = u.Host
		}
		if _, _, err := net.SplitHostPort(target); err != nil {
			target = net.JoinHostPort(strings.Trim(target, "[]"), "443") // gRPC's default port
		}
		if target == "" || strings.ContainsAny(target, "/?#") {
			return fmt.Errorf("OTLP: %s %q: not a host:port or URL", variable, raw)
		}
		if scheme == "http" {
			cfg.TLS = nil
		}
		cfg.URL = "//" + target + grpcMethod
		return nil
	}
	if err != nil || (scheme != "http" && scheme != "https") || u.Host == "" {
		return fmt.Errorf("OTLP: %s %q: not an http or https URL", variable, raw)
	}
	switch {
	case variable == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" && u.Path == "":
		u.Path = "/"
	case variable == "OTEL_EXPORTER_OTLP_ENDPOINT":
		u.Path = path.Join(u.Path, "/v1/traces")
	}
	if scheme == "http" {
		cfg.TLS = nil
	}
	u.Scheme = ""
	cfg.URL = u.String()
	return nil
}

// insecure applies OTEL_EXPORTER_OTLP_INSECURE: true is plain text, false TLS,
// whatever the endpoint's scheme.
func insecure(cfg *Config) error {
	raw, variable := env("INSECURE")
	if raw == "" {
		return nil
	}
	b, err := strconv.ParseBool(raw)
	if err != nil {
		return fmt.Errorf("OTLP: %s %q: not true or false", variable, raw)
	}
	switch {
	case b:
		cfg.TLS = nil
	case cfg.TLS == nil:
		cfg.TLS = &tls.Config{}
	}
	return nil
}

// headers parses key=value pairs, comma-separated, values percent-encoded (the W3C
// baggage format the variable uses).
func headers(cfg *Config) error {
	raw, variable := env("HEADERS")
	if raw == "" {
		return nil
	}
	cfg.Headers = map[string]string{}
	for _, pair := range strings.Split(raw, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || !validHeaderKey(k) {
			return fmt.Errorf("OTLP: %s: %q is not key=value", variable, pair)
		}
		value, err := url.PathUnescape(v)
		if err != nil {
			return fmt.Errorf("OTLP: %s: the value of %q: %v", variable, k, err)
		}
		cfg.Headers[k] = strings.TrimSpace(value)
	}
	return nil
}

// validHeaderKey: an HTTP token.
func validHeaderKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if c > 0x7e || c <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c) {
			return false
		}
	}
	return true
}

func timeout(cfg *Config) error {
	raw, variable := env("TIMEOUT")
	if raw == "" {
		return nil
	}
	ms, err := strconv.Atoi(raw)
	if err != nil || ms <= 0 {
		return fmt.Errorf("OTLP: %s %q: not a positive number of milliseconds", variable, raw)
	}
	cfg.Timeout = time.Duration(ms) * time.Millisecond
	return nil
}

// compression: gzip, or none (anything else, as the OpenTelemetry exporters read it).
func compression(cfg *Config) error {
	raw, _ := env("COMPRESSION")
	cfg.Gzip = raw == "gzip"
	return nil
}

// certificates loads the CA bundle and the client's key pair, when named.
func certificates(cfg *Config) error {
	if cfg.TLS == nil {
		return nil
	}
	if file, variable := env("CERTIFICATE"); file != "" {
		pem, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("OTLP: %s: %w", variable, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("OTLP: %s %s: no PEM certificate in it", variable, file)
		}
		cfg.TLS.RootCAs = pool
	}
	cert, certVar := env("CLIENT_CERTIFICATE")
	key, keyVar := env("CLIENT_KEY")
	switch {
	case cert == "" && key == "":
		return nil
	case cert == "" || key == "":
		return fmt.Errorf("OTLP: OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY go together")
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return fmt.Errorf("OTLP: %s / %s: %w", certVar, keyVar, err)
	}
	cfg.TLS.Certificates = []tls.Certificate{pair}
	return nil
}
