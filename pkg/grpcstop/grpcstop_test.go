package grpcstop

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// serve runs a server with the health service on a unix socket, and a
// client's open Watch stream on it.
func serve(t *testing.T) (*grpc.Server, healthpb.Health_WatchClient) {
	t.Helper()
	l, err := net.Listen("unix", t.TempDir()+"/s.sock")
	require.NoError(t, err)
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(l) }()
	conn, err := grpc.NewClient("unix://"+l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	stream, err := healthpb.NewHealthClient(conn).Watch(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = stream.Recv()
	require.NoError(t, err)
	return s, stream
}

// An open stream that does not end holds a graceful stop: it is cut
// once the deadline passed, and Stop returns.
func TestStopCutsWhatOutlivesTheDeadline(t *testing.T) {
	s, stream := serve(t)
	Stop(s, 50*time.Millisecond)
	_, err := stream.Recv()
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
}

// Before the deadline, Stop waits for the open calls: here a stream the
// server never ends, until the server is stopped by force.
func TestStopWaitsForOpenCalls(t *testing.T) {
	s, _ := serve(t)
	done := make(chan struct{})
	go func() { Stop(s, time.Hour); close(done) }()
	select {
	case <-done:
		t.Fatal("Stop returned with a stream open")
	case <-time.After(100 * time.Millisecond):
	}
	s.Stop()
	<-done
}
