package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"
)

// shutdownTimeout bounds how long Serve waits for open requests on exit.
const shutdownTimeout = 2 * time.Second

// Health is what a binary's /healthz and /readyz answer. /healthz has
// no check: it answers 200 "ok" while the process serves HTTP at all, so a
// liveness probe restarts only a process that is stuck or gone, never one
// that waits for the kubelet or the runtime (it reconnects by itself).
type Health struct {
	// Ready returns nil when the process does its job, and otherwise why
	// not; /readyz answers 200 "ok" or 503 "not ready: <reason>". Nil
	// means always ready.
	Ready func() error
	// Warnings, when set, returns problems that do not make the process
	// unready (a node without a GPU is normal) but that an operator asking
	// should see; /readyz adds one "warning: ..." line each, ready or not.
	Warnings func() []string
}

// Handler serves /metrics from reg, and /healthz and /readyz from h.
func Handler(reg *prometheus.Registry, h Health) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		plainText(w)
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		var notes []string
		if h.Warnings != nil {
			notes = h.Warnings()
		}
		plainText(w)
		if err := h.ready(); err != nil {
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

func (h Health) ready() error {
	if h.Ready == nil {
		return nil
	}
	return h.Ready()
}

func plainText(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
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
	log.WithField("addr", l.Addr().String()).Info("serving /metrics, /healthz and /readyz")
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

// Start runs Serve on its own goroutine, counted in wg, and logs its
// failure: the one way each daemon serves its metrics and health
// endpoints next to its real work. A failed metrics server does not stop
// the daemon; the liveness probe on /healthz notices it.
func Start(ctx context.Context, wg *sync.WaitGroup, l net.Listener, h http.Handler, log *logrus.Entry) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := Serve(ctx, l, h, log); err != nil {
			log.WithError(err).Error("metrics server failed")
		}
	}()
}
