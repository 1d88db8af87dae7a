package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"
)

// shutdownTimeout bounds how long Serve waits for open requests on exit.
const shutdownTimeout = 2 * time.Second

// Handler serves /metrics from reg, /healthz, and /readyz, which answers
// 200 when ready returns nil and 503 with the error otherwise.
func Handler(reg *prometheus.Registry, ready func() error) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// Listen opens addr (host:port; port 0 picks one) for Serve, so that
// callers learn a bad address before anything else starts.
func Listen(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on metrics address %q: %w", addr, err)
	}
	return l, nil
}

// Serve answers h on l until ctx ends, then shuts down within a bounded
// time.
func Serve(ctx context.Context, l net.Listener, h http.Handler, log *logrus.Entry) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	log.WithField("addr", l.Addr().String()).Info("serving metrics and health")
	select {
	case err := <-errc:
		return fmt.Errorf("metrics server: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("metrics server shutdown: %w", err)
	}
	_ = srv.Close()
	<-errc
	return nil
}
