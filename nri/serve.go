package nri

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"
)

// Check is a health or readiness check; nil means pass.
type Check func() error

// ServeMetrics listens on addr and serves /metrics from m, /healthz and
// /readyz until ctx ends. It returns once listening, so a bad address is
// reported at start, with the address listened on; done is closed when the
// server has stopped.
func ServeMetrics(ctx context.Context, addr string, m *Metrics, healthz, readyz Check, log *logrus.Entry) (bound net.Addr, done <-chan struct{}, err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to listen on metrics address %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry(), promhttp.HandlerOpts{Registry: m.Registry()}))
	mux.Handle("/healthz", checkHandler(healthz))
	mux.Handle("/readyz", checkHandler(readyz))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.WithError(err).Error("metrics server stopped")
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.WithField("addr", l.Addr().String()).Info("serving /metrics, /healthz and /readyz")
	return l.Addr(), ch, nil
}

func checkHandler(c Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if c != nil {
			if err := c(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = fmt.Fprintln(w, err)
				return
			}
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
}

// Healthz passes while the plugin is connected to the runtime.
func (p *Plugin) Healthz() error {
	if !p.Connected() {
		return errors.New("not connected to the runtime's NRI socket")
	}
	return nil
}

// Readyz passes when the plugin is connected and the specs of store are
// loaded and watched.
func (p *Plugin) Readyz(store *SpecIndex) Check {
	return func() error {
		if err := p.Healthz(); err != nil {
			return err
		}
		if store != nil && !store.Loaded() {
			return errors.New("CDI specs not loaded yet")
		}
		if store != nil {
			if err := store.WatchErr(); err != nil {
				return err
			}
		}
		return nil
	}
}
