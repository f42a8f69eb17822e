// Package otlp sends OpenTelemetry spans to an OTLP receiver, over OTLP/HTTP (binary
// protobuf) or OTLP/gRPC, configured by the standard OTEL_EXPORTER_OTLP_* variables.
//
// It is an sdktrace.SpanExporter in the place of the OpenTelemetry project's OTLP
// exporters, which link gRPC and the protobuf runtime into every dsh binary: their
// package initialisation alone cost each start about 1.5 ms, traces or not (see
// docs/performance.md). It encodes the spans with a small protobuf writer, speaks gRPC's
// unary call over net/http's HTTP/2, and retries what the OTLP specification calls
// retryable. It does not speak OTLP/JSON, and does not read gRPC's retry hints.
package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Exporter sends spans to the receiver its Config names. It is safe for concurrent use.
type Exporter struct {
	cfg       Config
	transport *http.Transport
	client    *http.Client

	mu      sync.Mutex
	stopped bool
}

var _ sdktrace.SpanExporter = (*Exporter)(nil)

// New returns an exporter for cfg.
func New(cfg Config) *Exporter {
	t := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSClientConfig:     cfg.TLS,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        4,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	if cfg.Protocol == GRPC {
		// gRPC is HTTP/2 only: over TLS by ALPN, in plain text with prior knowledge.
		var p http.Protocols
		if cfg.TLS != nil {
			p.SetHTTP2(true)
		} else {
			// Plain text goes direct: a proxy would be sent the request itself, which
			// HTTP/2 with prior knowledge does not do (a TLS one is tunnelled with CONNECT).
			p.SetUnencryptedHTTP2(true)
			t.Proxy = nil
		}
		t.Protocols = &p
	}
	return &Exporter{cfg: cfg, transport: t, client: &http.Client{Transport: t}}
}

// ExportSpans sends spans in one request, retrying a retryable failure until the
// configured timeout (or ctx) ends.
func (e *Exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	stopped := e.stopped
	e.mu.Unlock()
	if stopped || len(spans) == 0 {
		return nil
	}
	body, err := e.body(Request(spans))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	return retry(ctx, func() (time.Duration, error) { return e.send(ctx, body) })
}

// Shutdown stops exporting and closes the idle connections.
func (e *Exporter) Shutdown(context.Context) error {
	e.mu.Lock()
	e.stopped = true
	e.mu.Unlock()
	e.transport.CloseIdleConnections()
	return nil
}

// body is the request body of a message: compressed if asked, framed for gRPC.
func (e *Exporter) body(msg []byte) ([]byte, error) {
	if e.cfg.Gzip {
		var b bytes.Buffer
		z := gzip.NewWriter(&b)
		if _, err := z.Write(msg); err != nil {
			return nil, err
		}
		if err := z.Close(); err != nil {
			return nil, err
		}
		msg = b.Bytes()
	}
	if e.cfg.Protocol != GRPC {
		return msg, nil
	}
	framed := make([]byte, 5, 5+len(msg))
	if e.cfg.Gzip {
		framed[0] = 1
	}
	n := len(msg)
	framed[1], framed[2], framed[3], framed[4] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return append(framed, msg...), nil
}

// errRetryable marks a failure the OTLP specification says to retry.
type errRetryable struct{ err error }

func (e errRetryable) Error() string { return e.err.Error() }
func (e errRetryable) Unwrap() error { return e.err }

// send makes one request. A retryable failure comes with how long the receiver asked
// to wait (0: not said).
func (e *Exporter) send(ctx context.Context, body []byte) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url(), bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, v := range e.cfg.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("User-Agent", "dsh-otlp")
	if e.cfg.Protocol == GRPC {
		e.grpcHeaders(ctx, req)
	} else {
		req.Header.Set("Content-Type", "application/x-protobuf")
		if e.cfg.Gzip {
			req.Header.Set("Content-Encoding", "gzip")
		}
	}
	resp, err := e.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, err
		}
		return 0, errRetryable{fmt.Errorf("OTLP: %w", err)}
	}
	defer resp.Body.Close()
	if e.cfg.Protocol == GRPC {
		return grpcOutcome(resp)
	}
	return httpOutcome(resp)
}

// url is the configured URL with the scheme the TLS setting chose.
func (e *Exporter) url() string {
	if e.cfg.TLS == nil {
		return "http:" + e.cfg.URL
	}
	return "https:" + e.cfg.URL
}

// maxResponse bounds what is read of a receiver's answer.
const maxResponse = 64 << 10

// httpOutcome judges an OTLP/HTTP response: 2xx is success; 429, 502, 503 and 504 are
// retryable (after Retry-After, when given); anything else fails with its status and
// the start of its body.
func httpOutcome(resp *http.Response) (time.Duration, error) {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if resp.StatusCode/100 == 2 {
		return 0, nil
	}
	err := fmt.Errorf("OTLP/HTTP: %s: %s", resp.Status, excerpt(msg))
	if retryableStatus(resp.StatusCode) {
		return retryAfter(resp.Header.Get("Retry-After")), errRetryable{err}
	}
	return 0, err
}

// retryableStatus: the HTTP statuses OTLP says to retry (429, 502, 503, 504).
func retryableStatus(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

func excerpt(b []byte) string {
	const max = 200
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

func retryAfter(v string) time.Duration {
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}

// Backoff between attempts: doubling from the first, up to the last.
const (
	firstBackoff = 250 * time.Millisecond
	maxBackoff   = 5 * time.Second
)

// retry calls attempt until it succeeds, fails for good, or ctx ends (then the last
// failure is returned).
func retry(ctx context.Context, attempt func() (time.Duration, error)) error {
	wait := firstBackoff
	for {
		asked, err := attempt()
		var r errRetryable
		if err == nil || !errors.As(err, &r) {
			return err
		}
		d := max(asked, wait)
		wait = min(2*wait, maxBackoff)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
			return r.err
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return r.err
		case <-t.C:
		}
	}
}
