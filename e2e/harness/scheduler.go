package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// SchedulerMetrics reads kube-scheduler's /metrics on its secure port,
// as the cluster's admin (system:masters: its client cert, which the
// scheduler's delegated authentication and authorization accept).
func (c *Cluster) SchedulerMetrics(ctx context.Context) (Metrics, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("admin kubeconfig: %w", err)
	}
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("admin TLS config: %w", err)
	}
	// The scheduler serves a self-signed cert of its own (--cert-dir),
	// on loopback.
	tlsCfg.RootCAs, tlsCfg.InsecureSkipVerify = nil, true //nolint:gosec
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", schedulerPort), nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("kube-scheduler metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("kube-scheduler metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("kube-scheduler metrics: %s: %s", resp.Status, body)
	}
	return ParseMetrics(string(body))
}
