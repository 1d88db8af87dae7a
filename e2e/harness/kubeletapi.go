package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// PodStatus is the part of a pod's status the scenarios read.
type PodStatus struct {
	Phase      string            `json:"phase"`
	Reason     string            `json:"reason"`
	Message    string            `json:"message"`
	Containers []ContainerStatus `json:"containerStatuses"`
}

// ContainerStatus is the part of a container's status the scenarios read.
type ContainerStatus struct {
	Name         string `json:"name"`
	RestartCount int    `json:"restartCount"`
	ContainerID  string `json:"containerID"`
	State        struct {
		Waiting *struct {
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"waiting"`
		Running    *struct{} `json:"running"`
		Terminated *struct {
			ExitCode int    `json:"exitCode"`
			Reason   string `json:"reason"`
			Message  string `json:"message"`
		} `json:"terminated"`
	} `json:"state"`
}

// WaitingWith is a WaitPod condition: a container of the pod waits (to
// be created or restarted) with a message that contains substr, as a
// container whose device the runtime or dri-cdi refused does.
func WaitingWith(substr string) func(PodStatus) bool {
	return func(s PodStatus) bool {
		for _, c := range s.Containers {
			if c.State.Waiting != nil && strings.Contains(c.State.Waiting.Message, substr) {
				return true
			}
		}
		return false
	}
}

// Describe is a one-line summary for logs and failures.
func (s PodStatus) Describe() string {
	parts := []string{"phase=" + s.Phase}
	if s.Reason != "" || s.Message != "" {
		parts = append(parts, fmt.Sprintf("reason=%s message=%q", s.Reason, s.Message))
	}
	for _, c := range s.Containers {
		switch {
		case c.State.Waiting != nil:
			parts = append(parts, fmt.Sprintf("%s waiting %s: %q", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message))
		case c.State.Running != nil:
			parts = append(parts, c.Name+" running")
		case c.State.Terminated != nil:
			parts = append(parts, fmt.Sprintf("%s terminated %s (exit %d): %q", c.Name, c.State.Terminated.Reason, c.State.Terminated.ExitCode, c.State.Terminated.Message))
		}
	}
	return strings.Join(parts, "; ")
}

// Pods returns the kubelet's pods by full name, from its read-only port.
func (n *Node) Pods(ctx context.Context) (map[string]PodStatus, error) {
	body, err := n.readOnly(ctx, "/pods")
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Status PodStatus `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("parse kubelet /pods: %w", err)
	}
	out := map[string]PodStatus{}
	for _, it := range list.Items {
		out[it.Metadata.Name] = it.Status
	}
	return out, nil
}

// WaitPod waits until the pod's status satisfies cond.
func (n *Node) WaitPod(ctx context.Context, name string, timeout time.Duration, cond func(PodStatus) bool) (PodStatus, error) {
	full := name + "-" + NodeName
	var last PodStatus
	err := poll(ctx, timeout, func() (bool, error) {
		pods, err := n.Pods(ctx)
		if err != nil {
			return false, nil
		}
		st, ok := pods[full]
		if !ok {
			return false, nil
		}
		last = st
		return cond(st), nil
	})
	if err != nil {
		return last, fmt.Errorf("pod %s: %w (last status: %s)", name, err, last.Describe())
	}
	return last, nil
}

func (n *Node) readOnly(ctx context.Context, path string) ([]byte, error) {
	body, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d%s", kubeletReadOnlyPort, path), 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("kubelet %s: %w", path, err)
	}
	return body, nil
}

// httpGet GETs url within timeout and returns the body of a 200 answer.
func httpGet(ctx context.Context, url string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return body, nil
}

// KubeletMetric sums the samples of a kubelet metric whose labels
// include every pair of labels (name, value, ...); 0 when there is none.
func (n *Node) KubeletMetric(ctx context.Context, name string, labels ...string) (float64, error) {
	m, err := n.KubeletMetrics(ctx)
	if err != nil {
		return 0, err
	}
	v, _ := m.Sum(name, labels...)
	return v, nil
}

// KubeletMetrics scrapes the kubelet's /metrics once.
func (n *Node) KubeletMetrics(ctx context.Context) (Metrics, error) {
	body, err := n.readOnly(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	m, err := ParseMetrics(string(body))
	if err != nil {
		return nil, fmt.Errorf("kubelet: %w", err)
	}
	return m, nil
}
