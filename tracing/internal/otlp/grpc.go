package otlp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// grpcHeaders sets what a gRPC unary call over HTTP/2 sends: the content type,
// trailers, the compression and the deadline.
func (e *Exporter) grpcHeaders(ctx context.Context, req *http.Request) {
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	if e.cfg.Gzip {
		req.Header.Set("Grpc-Encoding", "gzip")
	}
	if dl, ok := ctx.Deadline(); ok {
		if ms := time.Until(dl).Milliseconds(); ms > 0 {
			req.Header.Set("Grpc-Timeout", strconv.FormatInt(ms, 10)+"m")
		}
	}
}

// gRPC status codes the OTLP specification says to retry: CANCELLED,
// DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED, OUT_OF_RANGE, UNAVAILABLE,
// DATA_LOSS.
var grpcRetryable = map[int]bool{1: true, 4: true, 8: true, 10: true, 11: true, 14: true, 15: true}

// grpcOutcome judges a gRPC response: its grpc-status (in the trailers, or the
// headers of a trailers-only answer) is 0 on success. An HTTP error status, before
// any gRPC status, is retryable when it is 429, 502, 503 or 504.
func grpcOutcome(resp *http.Response) (time.Duration, error) {
	// The body (a length-prefixed ExportTraceServiceResponse) is read to the end so
	// that the trailers arrive; what it says of a partial success is not used.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse))
	status := resp.Trailer.Get("Grpc-Status")
	msg := resp.Trailer.Get("Grpc-Message")
	if status == "" {
		status, msg = resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message")
	}
	if status == "" {
		err := fmt.Errorf("OTLP/gRPC: %s without a gRPC status", resp.Status)
		if retryableStatus(resp.StatusCode) {
			return 0, errRetryable{err}
		}
		return 0, err
	}
	code, err := strconv.Atoi(status)
	if err != nil {
		return 0, fmt.Errorf("OTLP/gRPC: grpc-status %q", status)
	}
	if code == 0 {
		return 0, nil
	}
	if m, err := url.PathUnescape(msg); err == nil {
		msg = m
	}
	failure := fmt.Errorf("OTLP/gRPC: status %d: %s", code, msg)
	if grpcRetryable[code] {
		return 0, errRetryable{failure}
	}
	return 0, failure
}
