package otlptest

import (
	"context"
	"net"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // decodes a gzip-compressed export
)

type grpcReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	r    *Receiver
	srv  *grpc.Server
	addr string
}

// StartGRPC starts an OTLP/gRPC receiver (plain text, on 127.0.0.1); Close stops it.
func StartGRPC() *Receiver {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic("otlptest: " + err.Error())
	}
	r := &Receiver{}
	g := &grpcReceiver{r: r, srv: grpc.NewServer(), addr: ln.Addr().String()}
	r.grpc = g
	coltracepb.RegisterTraceServiceServer(g.srv, g)
	go g.srv.Serve(ln)
	return r
}

func (g *grpcReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	g.r.keep(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}
