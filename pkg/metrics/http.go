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
	return HandlerWithWarnings(reg, ready, nil)
}

// HandlerWithWarnings is Handler whose /readyz also lists what warnings
// returns, one "warning: ..." line each, whether ready or not: problems
// that do not make the process unready (a node without a GPU is normal)
// but that an operator asking it should see.
func HandlerWithWarnings(reg *prometheus.Registry, ready func() error, warnings func() []string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		var notes []string
		if warnings != nil {
			notes = warnings()
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if err := ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready: "+err.Error())
		} else {
			fmt.Fprintln(w, "ok")
		}
		for _, n := range notes {
			fmt.Fprintln(w, "warning: "+n)
		}
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
