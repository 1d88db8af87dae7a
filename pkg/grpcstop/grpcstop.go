// Package grpcstop stops a gRPC server the way dri-cdi's daemons stop
// theirs: gracefully, but not for longer than a deadline.
package grpcstop

import (
	"time"

	"google.golang.org/grpc"
)

// Stop stops s gracefully: it stops accepting connections and waits for
// the open calls to finish; those still open after deadline are cut
// (grpc.Server.Stop). It returns once s is stopped.
func Stop(s *grpc.Server, deadline time.Duration) {
	done := make(chan struct{})
	go func() { s.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(deadline):
		s.Stop()
		<-done
	}
}
